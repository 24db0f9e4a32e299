import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as SqlError from "effect/sql/SqlError"
import type { Executor, Planned } from "./ledgerSql.ts"
import type { Failure, Reply, Request, WorkerConfig } from "./ledgerWorker.ts"
import { toSqlError } from "./sqliteError.ts"
import { workerEntry } from "./workerEntry.ts"

const entry = workerEntry("ledgerWorker", import.meta.url)

/** `node:worker_threads`, loaded with the first writer thread: ≈ 2 ms of CPU a run without one saves. */
const workerThreads = () => process.getBuiltinModule("node:worker_threads")

const fromFailure = (failure: Failure, operation: string): SqlError.SqlError =>
  toSqlError(
    Object.assign(new Error(failure.message), failure.errcode === undefined ? {} : { errcode: failure.errcode }),
    operation,
    failure.sql
  )

const gone = (message: string): SqlError.SqlError =>
  new SqlError.SqlError({ reason: new SqlError.ConnectionError({ cause: undefined, operation: "apply", message }) })

/** Whether a file name names a private in-memory database, which another thread cannot open. */
export const isMemoryFile = (filename: string): boolean =>
  filename === ":memory:" ||
  filename === "" ||
  filename.startsWith("file::memory:") ||
  /[?&]mode=memory\b/.test(filename)

/**
 * Commits batches on a worker thread's own connection to `config.filename`, one transaction each,
 * so the SQLite work of a flush runs beside the run's fibers instead of blocking them. The worker
 * keeps the process alive only while a batch is in flight and is terminated with the scope.
 *
 * The executor is returned at once, while the thread boots (≈ 40 ms of its own, its connection
 * opened): batches sent before it is ready wait in its message queue, and a failure to open fails
 * them and every later one.
 */
export const makeWorkerExecutor = (config: WorkerConfig): Effect.Effect<Executor, SqlError.SqlError, Scope.Scope> =>
  Effect.gen(function* () {
    const pending = new Map<number, (result: Effect.Effect<void, SqlError.SqlError>) => void>()
    let broken: SqlError.SqlError | undefined
    let nextId = 0
    const breakAll = (error: SqlError.SqlError): void => {
      broken ??= error
      for (const resume of pending.values()) resume(Effect.fail(error))
      pending.clear()
    }
    const worker = yield* Effect.acquireRelease(
      Effect.sync(() => new (workerThreads().Worker)(entry, { workerData: config })),
      (worker) =>
        Effect.promise(() => {
          broken ??= gone("the run ledger's writer thread was closed")
          return worker.terminate()
        })
    )
    worker.on("message", (reply: Reply) => {
      if (reply._tag === "Ready") return
      const id = reply.id
      if (id === undefined) return breakAll(fromFailure(reply as Failure, "open"))
      const resume = pending.get(id)
      pending.delete(id)
      if (pending.size === 0) worker.unref()
      resume?.(reply._tag === "Failed" ? Effect.fail(fromFailure(reply, "apply")) : Effect.void)
    })
    worker.on("error", (error) => breakAll(toSqlError(error, "apply")))
    worker.on("exit", (code) => breakAll(gone(`the run ledger's writer thread exited with code ${code}`)))
    worker.unref()
    // The worker keeps each SQL text it was sent; later requests name it by number.
    const numbers = new Map<string, number>()
    const request = (id: number, planned: ReadonlyArray<Planned>): Request => {
      const texts: Array<readonly [number, string]> = []
      const statements = planned.map(([text, params, arity]) => {
        let number = numbers.get(text)
        if (number === undefined) {
          numbers.set(text, (number = numbers.size))
          texts.push([number, text])
        }
        return [number, params, arity] as const
      })
      return { id, texts, statements }
    }
    return (planned) =>
      Effect.callback<void, SqlError.SqlError>((resume) => {
        if (broken !== undefined) return resume(Effect.fail(broken))
        const id = nextId++
        pending.set(id, resume)
        worker.ref()
        worker.postMessage(request(id, planned))
      })
  })
