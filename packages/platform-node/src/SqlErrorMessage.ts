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
 * failed (relation "x" already exists)`. A chain of causes that comes back on itself ends at the
 * first error read twice.
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
}): string => answerOf(error, new Set())

type Answered = Parameters<typeof withServerAnswer>[0]

/** `withServerAnswer`, reading each error of a chain of causes once (a chain may come back on itself). */
const answerOf = (error: Answered, read: Set<unknown>): string => {
  read.add(error)
  if (error.reason === undefined && error.cause instanceof Error && !read.has(error.cause)) {
    const inner = answerOf(error.cause, read)
    return inner === "" || error.message.includes(inner) ? error.message : `${error.message}: ${inner}`
  }
  const cause = error.reason?.cause
  const answer = cause instanceof Error ? cause.message : ""
  return answer === "" || error.message.includes(answer) ? error.message : `${error.message} (${answer})`
}
