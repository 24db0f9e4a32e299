import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as SqlError from "effect/sql/SqlError"

const SQLITE_ERROR = 1
const SQLITE_PERM = 3
const SQLITE_BUSY = 5
const SQLITE_LOCKED = 6
const SQLITE_CANTOPEN = 14
const SQLITE_CONSTRAINT = 19
const SQLITE_AUTH = 23
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555
const SQLITE_CONSTRAINT_UNIQUE = 2067

const maxStatementLength = 1_000

const errcodeOf = (cause: unknown): number | undefined => {
  if (typeof cause !== "object" || cause === null) return undefined
  const errcode = (cause as { readonly errcode?: unknown }).errcode
  return typeof errcode === "number" ? errcode : undefined
}

const messageOf = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : String(cause)

const uniqueConstraint = (message: string): string => {
  const prefix = "constraint failed:"
  const index = message.indexOf(prefix)
  const constraint = index === -1 ? "" : message.slice(index + prefix.length).trim()
  return constraint.length === 0 ? "unknown" : constraint
}

const describe = (message: string, sql: string | undefined): string => {
  if (sql === undefined) return message
  const statement = sql.length > maxStatementLength ? `${sql.slice(0, maxStatementLength)}...` : sql
  return `${message}, in statement: ${statement}`
}

/**
 * Maps an error thrown by `node:sqlite` (which carries the extended result code in `errcode`)
 * to a `SqlError` whose message holds the SQLite message and the statement.
 */
export const toSqlError = (cause: unknown, operation: string, sql?: string): SqlError.SqlError => {
  const sqliteMessage = messageOf(cause)
  const props = { cause, operation, message: describe(sqliteMessage, sql) }
  const errcode = errcodeOf(cause)
  return new SqlError.SqlError({ reason: classify(errcode, sqliteMessage, props) })
}

/**
 * Maps an error thrown while opening `filename` to a `SqlError` whose message names the file and,
 * when the file's folder does not exist (SQLite creates the file, not its folders), that folder.
 */
export const toOpenError = (cause: unknown, filename: string): SqlError.SqlError => {
  const sqliteMessage = messageOf(cause)
  const folder = NodePath.resolve(NodePath.dirname(filename))
  const missing =
    filename.startsWith("file:") || NodeFs.existsSync(folder)
      ? ""
      : ` (the folder ${JSON.stringify(folder)} does not exist)`
  const message = `cannot open SQLite database ${JSON.stringify(filename)}: ${sqliteMessage}${missing}`
  return new SqlError.SqlError({
    reason: classify(errcodeOf(cause), sqliteMessage, { cause, operation: "open", message })
  })
}

const classify = (
  errcode: number | undefined,
  sqliteMessage: string,
  props: { readonly cause: unknown; readonly operation: string; readonly message: string }
): SqlError.SqlErrorReason => {
  if (errcode === undefined) return new SqlError.UnknownError(props)
  if (errcode === SQLITE_CONSTRAINT_UNIQUE || errcode === SQLITE_CONSTRAINT_PRIMARYKEY) {
    return new SqlError.UniqueViolation({ ...props, constraint: uniqueConstraint(sqliteMessage) })
  }
  switch (errcode & 0xff) {
    case SQLITE_ERROR:
      return /syntax error|incomplete input/.test(sqliteMessage)
        ? new SqlError.SqlSyntaxError(props)
        : new SqlError.UnknownError(props)
    case SQLITE_PERM:
      return new SqlError.AuthorizationError(props)
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return new SqlError.LockTimeoutError(props)
    case SQLITE_CANTOPEN:
      return new SqlError.ConnectionError(props)
    case SQLITE_CONSTRAINT:
      return new SqlError.ConstraintError(props)
    case SQLITE_AUTH:
      return new SqlError.AuthenticationError(props)
    default:
      return new SqlError.UnknownError(props)
  }
}
