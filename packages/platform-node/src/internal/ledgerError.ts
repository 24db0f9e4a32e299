import * as Schema from "effect/Schema"
import * as SqlErrorMessage from "../SqlErrorMessage.ts"

/**
 * The run ledger could not read or write its store (or was asked about a run it never started).
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { Console, Effect } from "effect"
 *
 * const program = Effect.flatMap(RunLedger.RunLedger, (ledger) =>
 *   ledger.getRun("r1").pipe(Effect.catchTag("RunLedgerError", (e) => Console.error(e.message))))
 * ```
 * @since 0.1.0
 * @category errors
 */
export class RunLedgerError extends Schema.TaggedError<RunLedgerError>()("RunLedgerError", {
  operation: Schema.String,
  message: Schema.String
}) {}

/** A `RunLedgerError` for `operation` saying the cause's message and, for an `SqlError`, the database's answer. */
export const ledgerError =
  (operation: string) =>
  (cause: Parameters<typeof SqlErrorMessage.withServerAnswer>[0]): RunLedgerError =>
    new RunLedgerError({ operation, message: SqlErrorMessage.withServerAnswer(cause) })
