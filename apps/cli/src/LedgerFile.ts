/**
 * What a command says when the ledger (`<state-dir>/ledger.db`) cannot be read: SQLite's reason and,
 * for a file that is not a SQLite database (random bytes) or a damaged one (cut short), what to do.
 * Such a file is left as it is: corral neither repairs nor replaces it.
 *
 * @since 0.1.0
 */
import type * as RunLedger from "@corral/platform-node/RunLedger"

const damage = /file is not a database|database disk image is malformed/

/**
 * Whether `error` says the ledger file is not a SQLite database or is damaged.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isDamaged = (error: RunLedger.RunLedgerError): boolean => damage.test(error.message)

/**
 * The message for a ledger that cannot be read: what to do when the file is damaged.
 *
 * @since 0.1.0
 * @category messages
 */
export const unreadable = (file: string, error: RunLedger.RunLedgerError): string => {
  const reason = damage.exec(error.message)?.[0]
  return reason === undefined
    ? `cannot read the run ledger: ${error.message}`
    : `cannot read the run ledger ${file}: ${reason} (left as it is); move it aside (mv ${file} ${file}.damaged) to start a new ledger, or choose another state folder with --state-dir or CORRAL_HOME`
}
