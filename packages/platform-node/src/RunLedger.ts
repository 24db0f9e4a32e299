/**
 * A durable record of runs: every agent's state transitions with timestamps, its current state
 * and outcome, and the values of successes for cached reruns. `corral status`, `corral report`
 * and resume after a crash read it back as {@link RunRecord.RunRecord}.
 *
 * SQL ledgers buffer writes in memory and commit them within `flushEvery` (50 ms) of the first one, when
 * `maxBuffered` writes are waiting, on `Finished`/`RunFinished`, on `finishRun` and when the layer
 * closes (the in-memory ledger applies each write at once). Each flush is one transaction, so a process killed at any instant leaves every agent in
 * the state of the last committed flush. An agent's row is written when the run starts and then
 * with the flushes that change it; a flush stores its transitions as one row per run.
 *
 * A run this ledger started (`startRun`) whose end never reached it — no `RunFinished` recorded, no
 * `finishRun` — is recorded `interrupted` when the ledger closes, its unfinished agents ended with
 * detail {@link unrecordedEnd}: a subscriber that outlasts an interrupted run's 1 s grace (a writer
 * stalled on a busy file) is interrupted before it records the run's last events, and the run would
 * otherwise stay `running` until `markCrashed` judged its process gone. A process killed outright
 * leaves it `running`, for `markCrashed`.
 *
 * @since 0.1.0
 */
import type * as CorralEvent from "@corral/core/CorralEvent"
import * as DurationOption from "@corral/core/DurationOption"
import * as Ledger from "@corral/core/Ledger"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import { RunLedgerError } from "./internal/ledgerError.ts"
import { isMemoryFile, makeWorkerExecutor } from "./internal/ledgerExecutor.ts"
import { makeLedger, unrecordedEnd as unrecordedEndDetail } from "./internal/ledgerService.ts"
import { type Executor, makeSqlStore, migrate, type WriteStats } from "./internal/ledgerSql.ts"
import { makeMemoryStore } from "./internal/ledgerStore.ts"
import * as SqlErrorMessage from "./SqlErrorMessage.ts"
import type * as RunRecord from "./RunRecord.ts"
import * as SqliteClient from "./SqliteClient.ts"

export { RunLedgerError } from "./internal/ledgerError.ts"

/**
 * The `detail` of the agents of a run that a closing ledger recorded `interrupted` because the run's
 * end never reached it (its subscriber was interrupted first): `Interrupted` if they had started
 * (a cluster runner may still run them, as after a crash), else `Cancelled`.
 *
 * @since 0.1.0
 * @category models
 */
export const unrecordedEnd: string = unrecordedEndDetail
export type { WriteStats } from "./internal/ledgerSql.ts"

/**
 * An agent of a plan as the ledger first records it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlannedAgent {
  readonly agentId: string
  readonly dependsOn: ReadonlyArray<string>
  readonly idempotencyKey?: string | null | undefined
}

/**
 * What a run records when it starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunStart {
  readonly runId: string
  readonly planFile: string
  readonly planHash: string
  /** Any JSON-encodable value: the options the run was started with. */
  readonly options: unknown
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly agents: ReadonlyArray<PlannedAgent>
}

/**
 * Events of the command around a run: the result of merging an agent's branch.
 *
 * @since 0.1.0
 * @category models
 */
export interface MergeEvent {
  readonly _tag: "Merged" | "MergeConflict" | "NothingToMerge"
  readonly agentId: string
  readonly at: number
  readonly branch?: string | undefined
  readonly message?: string | undefined
  readonly [field: string]: unknown
}

/**
 * Any other event: stored as a transition with its fields as JSON. A string `branch` or `logPath`
 * field updates the agent's row, e.g. `{ _tag: "WorkspaceReady", agentId, at, branch, logPath }`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OtherEvent {
  readonly _tag: string
  readonly at: number
  readonly agentId?: string | undefined
  readonly [field: string]: unknown
}

/**
 * What `record` accepts.
 *
 * @since 0.1.0
 * @category models
 */
export type LedgerEvent = CorralEvent.CorralEvent | MergeEvent | OtherEvent

/**
 * One line of `listRuns`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunSummary {
  readonly runId: string
  readonly planFile: string
  readonly planHash: string
  readonly options: unknown
  readonly status: RunRecord.RunStatus
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly endedAt: number | null
  readonly heartbeatAt: number
  readonly total: number
  readonly done: number
  readonly succeeded: number
  readonly failed: number
}

/**
 * A recorded success that a rerun can reuse.
 *
 * @since 0.1.0
 * @category models
 */
export interface CachedSuccess {
  readonly value: unknown
  /** The run that produced the value; `""` when it was recorded through the core `Ledger` only. */
  readonly runId: string
  readonly agentId: string
  readonly recordedAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Records a run and its agents (state `pending`); committed before it returns. */
  readonly startRun: (start: RunStart) => Effect.Effect<void, RunLedgerError>
  /**
   * Buffers an event. `RunFinished` is committed before it returns; `Finished` starts a flush at once
   * (see {@link WriterOptions.commitEachFinished}).
   */
  readonly record: (runId: string, event: LedgerEvent) => Effect.Effect<void, RunLedgerError>
  readonly heartbeat: (runId: string) => Effect.Effect<void, RunLedgerError>
  /** Sets the final status (overriding the one derived from `RunFinished`); committed before it returns. */
  readonly finishRun: (
    runId: string,
    status: RunRecord.RunStatus,
    endedAt: number
  ) => Effect.Effect<void, RunLedgerError>
  readonly flush: Effect.Effect<void, RunLedgerError>
  /** Every run, newest first. */
  readonly listRuns: () => Effect.Effect<ReadonlyArray<RunSummary>, RunLedgerError>
  readonly getRun: (runId: string) => Effect.Effect<Option.Option<RunRecord.RunRecord>, RunLedgerError>
  /** The newest run of the plan when it is `running`, `crashed` or `interrupted`. */
  readonly latestUnfinished: (planHash: string) => Effect.Effect<Option.Option<RunSummary>, RunLedgerError>
  /**
   * Marks `running` runs whose process is gone as `crashed`, and their unfinished agents as
   * `Interrupted` with detail `crashed`. Returns the ids of the runs it marked. `RunLiveness.markCrashed`
   * asks a `RunLiveness` instead of a function of the recorded pid.
   */
  readonly markCrashed: (
    isAlive: (pid: number, hostname: string, runId: string) => boolean
  ) => Effect.Effect<ReadonlyArray<string>, RunLedgerError>
  /** The latest success recorded with this idempotency key, in any run. */
  readonly cachedSuccess: (idempotencyKey: string) => Effect.Effect<Option.Option<CachedSuccess>, RunLedgerError>
  /**
   * Deletes the successes `runId` recorded (committing what is buffered first), so no later run
   * reuses them; returns how many. `corral discard` calls it before it removes the run's branches,
   * which hold the work those successes stand for.
   */
  readonly forgetSuccesses: (runId: string) => Effect.Effect<number, RunLedgerError>
  /** Records a success by key outside of events (values that are not plain JSON data are skipped). */
  readonly recordSuccess: (
    idempotencyKey: string,
    agentId: string,
    value: unknown,
    recordedAt: number
  ) => Effect.Effect<void, RunLedgerError>
  /** What the store has written so far (SQL stores only; zeros in memory). */
  readonly stats: Effect.Effect<WriteStats>
}

/**
 * Options of the buffered writer. One the writer cannot use (a `flushEvery` that is not a positive
 * duration, a negative `flushSoon`, a `maxBuffered` below 1) fails opening the ledger with a
 * `RunLedgerError` of operation `options` naming it (`RunLedger flushEvery: ...`).
 *
 * @since 0.1.0
 * @category models
 */
export interface WriterOptions {
  /** The longest a buffered write waits for its commit (an idle writer arms no timer). @default "50 millis" */
  readonly flushEvery?: Duration.Input | undefined
  /** How soon after a `Finished` event the buffer is flushed (gathering other writes meanwhile). @default "5 millis" */
  readonly flushSoon?: Duration.Input | undefined
  /**
   * Writes buffered before a flush is forced. With {@link layerSqlite} (which commits on a writer
   * thread) the flush starts in the background, and `record` waits for one only when four times as
   * many are waiting. @default 1000
   */
  readonly maxBuffered?: number | undefined
  /**
   * `true`: `record(Finished)` commits before it returns (one transaction per agent; about 3x the
   * wall time of the in-memory ledger for 1,000 no-op agents). `false`: it schedules a flush within
   * `flushSoon` that commits with whatever else is buffered by then, and returns without waiting.
   * @default false
   */
  readonly commitEachFinished?: boolean | undefined
  /**
   * With {@link layerSqlite}: `true` commits each flush on a worker thread with its own connection, so
   * the SQLite work runs beside the run's fibers; `false` commits on the calling thread, over the
   * layer's connection, and saves starting the thread (a Node environment of its own and a second
   * connection) where flushes are few, as in `corral run`. Ignored by the other layers; `:memory:`
   * files always use the calling thread. @default true
   */
  readonly writerThread?: boolean | undefined
}

/** The writer's options with their defaults, or a `RunLedgerError` naming the first it cannot use. */
const writerOptions = (options: WriterOptions | undefined) =>
  Effect.suspend(() => {
    const flushEvery = DurationOption.intervalMillis(options?.flushEvery ?? 50)
    const flushSoon = DurationOption.millis(options?.flushSoon ?? 5)
    const maxBuffered = options?.maxBuffered ?? 1000
    const invalid = (option: string, reason: string) =>
      Effect.fail(new RunLedgerError({ operation: "options", message: `RunLedger ${option}: ${reason}` }))
    if (Result.isFailure(flushEvery)) return invalid("flushEvery", flushEvery.failure)
    if (Result.isFailure(flushSoon)) return invalid("flushSoon", flushSoon.failure)
    if (!(Number.isSafeInteger(maxBuffered) && maxBuffered >= 1))
      return invalid("maxBuffered", `must be a whole number of at least 1, got ${maxBuffered}`)
    return Effect.succeed({
      flushEvery: flushEvery.success,
      maxBuffered,
      flushSoon: flushSoon.success,
      commitEachFinished: options?.commitEachFinished ?? false
    })
  })

const newStats = (): WriteStats => ({ transactions: 0, statements: 0, rows: 0 })

/**
 * The run ledger service. It learns a run's progress from the events given to `record` (the run's
 * `onEvent`). A run interrupted from outside ends with `Finished` events and a `RunFinished` that
 * records it `interrupted`, as long as `record` handles them within the 1 second `Corral.run` grants
 * its subscriber then; for a writer slower than that, the ledger records the run `interrupted` when it
 * closes (a run it started whose end never reached it; see the module's comment).
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { RunLedger } from "@corral/platform-node"
 * import { Effect } from "effect"
 * import * as os from "node:os"
 *
 * const agents = [Agent.make("a", { run: Effect.succeed(1) })]
 * const program = Effect.gen(function*() {
 *   const ledger = yield* RunLedger.RunLedger
 *   yield* ledger.startRun({ runId: "r1", planFile: "plan.yaml", planHash: "h", options: {}, pid: process.pid,
 *     hostname: os.hostname(), startedAt: Date.now(), agents: [{ agentId: "a", dependsOn: [] }] })
 *   yield* Corral.run(agents, { runId: "r1", onEvent: (event) => ledger.record("r1", event) })
 *   return yield* ledger.getRun("r1")
 * }).pipe(Effect.provide(RunLedger.layerSqlite("state.db")))
 * ```
 * @since 0.1.0
 * @category services
 */
export class RunLedger extends Context.Service<RunLedger, Service>()("@corral/platform-node/RunLedger") {}

/**
 * A ledger over the `SqlClient` in context. Runs the ledger's migrations (table
 * `corral_ledger_migrations`) first, so any number of processes can open the same database.
 *
 * @example
 * ```ts
 * import { RunLedger, SqliteClient } from "@corral/platform-node"
 * import { Layer } from "effect"
 *
 * const ledger = RunLedger.layerSql().pipe(Layer.provide(SqliteClient.layer({ filename: "state.db" })))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerSql = (options?: WriterOptions): Layer.Layer<RunLedger, RunLedgerError, SqlClient.SqlClient> =>
  Layer.effect(
    RunLedger,
    Effect.flatMap(writerOptions(options), (writer) =>
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => fromSql(sql, writer))
    )
  )

type Writer = Effect.Success<ReturnType<typeof writerOptions>>

const fromSql = (
  sql: SqlClient.SqlClient,
  writer: Writer,
  executor?: Effect.Effect<Executor | undefined, RunLedgerError, Scope.Scope>
) =>
  Effect.gen(function* () {
    yield* migrate.pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.mapError(
        (error) => new RunLedgerError({ operation: "migrate", message: SqlErrorMessage.withServerAnswer(error) })
      )
    )
    const stats = newStats()
    const store = makeSqlStore(sql, stats, executor === undefined ? undefined : yield* executor)
    return yield* makeLedger(store, writer, stats)
  })

/** Flushes of a file ledger commit on a writer thread with its own connection, unless `writerThread: false`. */
const writerThread = (
  filename: string,
  options: WriterOptions | undefined
): Effect.Effect<Executor | undefined, RunLedgerError, Scope.Scope> =>
  isMemoryFile(filename) || options?.writerThread === false
    ? Effect.succeed(undefined)
    : makeWorkerExecutor({ filename, busyTimeoutMillis: 5000 }).pipe(
        Effect.mapError((error) => new RunLedgerError({ operation: "open", message: error.message }))
      )

/**
 * A ledger in a SQLite file (WAL), opened with our `SqliteClient` and closed with the layer. Flushes
 * commit on a worker thread with its own connection to the file, so their SQLite work runs beside
 * the run's fibers (`:memory:` databases, and `writerThread: false`, commit on the calling thread).
 * The file is created if missing, its folder is not (as the command creates `.corral/`): opening
 * fails with a `RunLedgerError` naming the file and the missing folder.
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.flatMap(RunLedger.RunLedger, (ledger) => ledger.getRun("r1"))
 * Effect.provide(program, RunLedger.layerSqlite("state.db"))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (filename: string, options?: WriterOptions): Layer.Layer<RunLedger, RunLedgerError> =>
  Layer.effect(
    RunLedger,
    Effect.flatMap(writerOptions(options), (writer) =>
      SqliteClient.make({ filename }).pipe(
        Effect.mapError((error) => new RunLedgerError({ operation: "open", message: error.message })),
        Effect.flatMap((sql) => fromSql(sql, writer, writerThread(filename, options))),
        Effect.provide(Reactivity.layer)
      )
    )
  )

/**
 * A ledger that lives as long as the layer; reads give what the SQL one gives, nothing on disk.
 * It has nothing to commit, so each write takes effect at once instead of being buffered.
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.flatMap(RunLedger.RunLedger, (ledger) => ledger.getRun("r1"))
 * Effect.provide(program, RunLedger.layerMemory)
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<RunLedger> = Layer.effect(
  RunLedger,
  Effect.flatMap(Effect.orDie(writerOptions(undefined)), (writer) => makeLedger(makeMemoryStore(), writer, newStats()))
)

/**
 * Core's idempotency `Ledger` backed by the run ledger: lookups read `cachedSuccess`, records
 * buffer a success row (committed with the next flush).
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { RunLedger } from "@corral/platform-node"
 * import { Effect, Layer } from "effect"
 *
 * const agents = [Agent.make("a", { run: Effect.succeed(1) })]
 * const layers = RunLedger.asCoreLedger.pipe(Layer.provideMerge(RunLedger.layerSqlite("state.db")))
 * Corral.run(agents).pipe(Effect.provide(layers)) // agents that succeeded before are not run again
 * ```
 * @since 0.1.0
 * @category layers
 */
export const asCoreLedger: Layer.Layer<Ledger.Ledger, never, RunLedger> = Layer.effect(
  Ledger.Ledger,
  Effect.map(Effect.service(RunLedger), (ledger) =>
    Ledger.Ledger.of({
      lookup: (key) =>
        ledger.cachedSuccess(key).pipe(
          Effect.map(Option.map((hit) => ({ agentId: hit.agentId, value: hit.value, recordedAt: hit.recordedAt }))),
          Effect.mapError((error) => new Ledger.LedgerError({ operation: "lookup", key, message: error.message }))
        ),
      record: (key, outcome) =>
        ledger
          .recordSuccess(key, outcome.agentId, outcome.value, outcome.endedAt)
          .pipe(
            Effect.mapError((error) => new Ledger.LedgerError({ operation: "record", key, message: error.message }))
          )
    })
  )
)
