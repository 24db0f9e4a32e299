/**
 * The run ledger's writer thread: its own connection to the ledger file, on which it commits each
 * batch of planned statements in one `BEGIN IMMEDIATE` transaction, so the SQLite work of a flush
 * does not run on the thread of the run's fibers. Imports only Node built-ins.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"
import { parentPort, workerData } from "node:worker_threads"

export interface WorkerConfig {
  readonly filename: string
  readonly busyTimeoutMillis: number
}

export interface Request {
  readonly id: number
  /** SQL texts not sent before, by number. */
  readonly texts: ReadonlyArray<readonly [number, string]>
  /** The number of a text, its parameters, and how many it takes (the rest are null). */
  readonly statements: ReadonlyArray<readonly [number, ReadonlyArray<unknown>, number]>
}

export interface Failure {
  readonly message: string
  readonly errcode: number | undefined
  readonly sql: string | undefined
}

export type Reply =
  | { readonly _tag: "Ready" }
  | { readonly _tag: "Committed"; readonly id: number }
  | ({ readonly _tag: "Failed"; readonly id: number | undefined } & Failure)

const toInput = (value: unknown): SQLInputValue =>
  value === undefined ? null : typeof value === "boolean" ? (value ? 1 : 0) : (value as SQLInputValue)

const failure = (error: unknown, sql: string | undefined): Failure => ({
  message: error instanceof Error ? error.message : String(error),
  errcode:
    typeof error === "object" && error !== null && typeof (error as { errcode?: unknown }).errcode === "number"
      ? (error as { errcode: number }).errcode
      : undefined,
  sql
})

const serve = (config: WorkerConfig): void => {
  const port = parentPort!
  let db: DatabaseSync
  try {
    db = new DatabaseSync(config.filename, { timeout: config.busyTimeoutMillis, enableForeignKeyConstraints: true })
    db.exec(`PRAGMA busy_timeout = ${config.busyTimeoutMillis}`)
    db.exec("PRAGMA synchronous = NORMAL")
  } catch (error) {
    port.postMessage({ _tag: "Failed", id: undefined, ...failure(error, undefined) } satisfies Reply)
    return
  }
  const texts = new Map<number, string>()
  const prepared = new Map<number, StatementSync>()
  const prepare = (text: number): StatementSync => {
    let statement = prepared.get(text)
    if (statement === undefined) {
      statement = db.prepare(texts.get(text)!)
      prepared.set(text, statement)
    }
    return statement
  }
  const bind = (params: ReadonlyArray<unknown>, arity: number): Array<SQLInputValue> => {
    const out = new Array<SQLInputValue>(arity)
    for (let i = 0; i < arity; i++) out[i] = i < params.length ? toInput(params[i]) : null
    return out
  }
  const commit = (request: Request): Reply => {
    for (const [number, text] of request.texts) texts.set(number, text)
    let current: string | undefined = "BEGIN IMMEDIATE"
    try {
      db.exec("BEGIN IMMEDIATE")
      try {
        for (const [text, params, arity] of request.statements) {
          current = texts.get(text)
          prepare(text).run(...bind(params, arity))
        }
        current = "COMMIT"
        db.exec("COMMIT")
      } catch (error) {
        if (db.isTransaction) db.exec("ROLLBACK")
        throw error
      }
      return { _tag: "Committed", id: request.id }
    } catch (error) {
      return { _tag: "Failed", id: request.id, ...failure(error, current) }
    }
  }
  port.on("message", (request: Request) => port.postMessage(commit(request)))
  port.on("close", () => db.close())
  port.postMessage({ _tag: "Ready" } satisfies Reply)
}

if (parentPort !== null) serve(workerData as WorkerConfig)
