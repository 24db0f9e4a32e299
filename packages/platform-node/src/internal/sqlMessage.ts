/**
 * An SQL error's message with the database's own answer: `@effect/sql-pg` says only `PgConnection:
 * Query failed` and keeps the server's answer (`permission denied for schema public`) in its reason's
 * cause, so a message built from `error.message` alone loses what went wrong.
 */
export const sqlMessage = (error: { readonly message: string; readonly reason?: { readonly cause?: unknown } }) => {
  const cause = error.reason?.cause
  const answer = cause instanceof Error ? cause.message : ""
  return answer === "" || error.message.includes(answer) ? error.message : `${error.message} (${answer})`
}
