/**
 * What a command says when the ledger (`<state-dir>/ledger.db`) or the claim table (`locks.db`) cannot
 * be read: SQLite's reason and, for a file that is not a SQLite database (random bytes) or a damaged
 * one (cut short), what to do.
 * Such a file is left as it is: corral neither repairs nor replaces it.
 *
 * @since 0.1.0
 */
import type * as RunLedger from "@corral/platform-node/RunLedger"

const damage = /file is not a database|database disk image is malformed/

/**
 * SQLite's word for a file that is not a database or is damaged, if `message` has it.
 *
 * @since 0.1.0
 * @category predicates
 */
export const damageOf = (message: string): string | undefined => damage.exec(message)?.[0]

/**
 * Whether `error` says the ledger file is not a SQLite database or is damaged.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isDamaged = (error: RunLedger.RunLedgerError): boolean => damageOf(error.message) !== undefined

/**
 * The message for a state file (`what`, e.g. "the run ledger") that is not a database or is
 * damaged: it is left as it is, and what to do.
 *
 * @since 0.1.0
 * @category messages
 */
export const damaged = (what: string, file: string, reason: string, fresh: string): string =>
  `cannot read ${what} ${file}: ${reason} (left as it is); move it aside (mv ${file} ${file}.damaged) to start ${fresh}, or choose another state folder with --state-dir or CORRAL_HOME`

/**
 * The message for a ledger that cannot be read: what to do when the file is damaged.
 *
 * @since 0.1.0
 * @category messages
 */
export const unreadable = (file: string, error: RunLedger.RunLedgerError): string => {
  const reason = damageOf(error.message)
  return reason === undefined
    ? `cannot read the run ledger: ${error.message}`
    : damaged("the run ledger", file, reason, "a new ledger")
}
