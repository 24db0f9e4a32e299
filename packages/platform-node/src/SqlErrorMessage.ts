/**
 * An SQL error's message with the database's own answer. `@effect/sql-pg` says only `PgConnection:
 * Query failed` (or `Failed to connect`) and keeps the server's answer (`permission denied for
 * schema public`, `database "x" does not exist`) or the socket's (`connect ECONNREFUSED …`) in its
 * reason's cause, so a message built from `error.message` alone loses what went wrong. The SQLite
 * ledger and every Postgres service of `@corral/postgres` and `@corral/cluster` build their messages
 * with it (it lives here, the lowest package both depend on).
 *
 * @since 0.1.0
 */

/**
 * `error.message` followed by the message of `error.reason.cause` in parentheses, unless that is
 * empty or already part of the message. An error with no `reason` whose `cause` is an error (a
 * `MigrationError` of a migration that failed: effect says only `Migration "1_x" failed`) is
 * followed by its cause's message, read the same way: `Migration "1_x" failed: PgConnection: Query
 * failed (relation "x" already exists)`.
 *
 * @example
 * ```ts
 * import { SqlErrorMessage } from "@corral/platform-node"
 * import { Effect } from "effect"
 * import * as SqlClient from "effect/sql/SqlClient"
 *
 * const create = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE notes (text TEXT)`).pipe(
 *   Effect.mapError((error) => new Error(SqlErrorMessage.withServerAnswer(error)))
 * ) // "PgConnection: Query failed (permission denied for schema public)"
 * ```
 * @since 0.1.0
 * @category utils
 */
export const withServerAnswer = (error: {
  readonly message: string
  readonly reason?: { readonly cause?: unknown }
  readonly cause?: unknown
}): string => {
  if (error.reason === undefined && error.cause instanceof Error) {
    const inner = withServerAnswer(error.cause as Error & { readonly reason?: { readonly cause?: unknown } })
    return inner === "" || error.message.includes(inner) ? error.message : `${error.message}: ${inner}`
  }
  const cause = error.reason?.cause
  const answer = cause instanceof Error ? cause.message : ""
  return answer === "" || error.message.includes(answer) ? error.message : `${error.message} (${answer})`
}
