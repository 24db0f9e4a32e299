/**
 * Whether the coordinator of a recorded run is still alive: the seam between the run ledger and the
 * way a machine can tell. A run whose status is `running` but whose coordinator is gone crashed.
 *
 * - {@link layerPid}: the run's recorded pid on this host (`kill -0`); coordinators on other hosts
 *   count as alive, since a pid means nothing there.
 * - {@link layerLease}: the run's lease in a repository's run registry (`RunRegistry`), as `corral gc`
 *   judges it; {@link layerPid}'s rule for a run with no lease there. What a single-machine `corral` uses.
 * - `PostgresLiveness` (`@corral/postgres`): a session advisory lock and a heartbeat in the cluster's
 *   database, so any machine tells a crashed coordinator from a live one.
 *
 * @since 0.1.0
 */
import * as NodeOs from "node:os"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as RunLedger from "./RunLedger.ts"
import * as RunRegistry from "./RunRegistry.ts"
import type { RunLedgerError } from "./RunLedger.ts"

/**
 * Another coordinator is alive for a run of the same lineage (the run being resumed, or another
 * resume of it): two coordinators of one lineage would run its agents twice.
 *
 * @since 0.1.0
 * @category errors
 */
export class LineageBusy extends Schema.TaggedError<LineageBusy>()("LineageBusy", {
  lineage: Schema.String,
  runId: Schema.String,
  pid: Schema.Number,
  hostname: Schema.String
}) {
  override get message(): string {
    return `run ${this.runId} of lineage ${this.lineage} is still coordinated by pid ${this.pid} on ${this.hostname}; stop it first (a second coordinator would run its agents twice)`
  }
}

/**
 * What liveness is decided from: a run as recorded (`RunLedger.RunSummary` and `RunRecord` are ones).
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRun {
  readonly runId: string
  readonly pid: number
  readonly hostname: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /**
   * Marks this process as the live coordinator of `runId` until the scope closes. With a `lineage`,
   * fails with {@link LineageBusy} when a run of that lineage has a live coordinator (checked and
   * taken atomically where the implementation can).
   */
  readonly hold: (run: {
    readonly runId: string
    readonly lineage?: string | undefined
  }) => Effect.Effect<void, LineageBusy | RunLedgerError, Scope.Scope>
  /** The ids among `runs` whose coordinator is alive. */
  readonly alive: (runs: ReadonlyArray<RecordedRun>) => Effect.Effect<ReadonlySet<string>, RunLedgerError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class RunLiveness extends Context.Service<RunLiveness, Service>()("@corral/platform-node/RunLiveness") {}

/**
 * Whether a process of this host is alive (`kill -0`; `EPERM` counts as alive). Processes of other
 * hosts count as alive.
 *
 * @since 0.1.0
 * @category liveness
 */
export const pidAlive = (pid: number, hostname: string): boolean => {
  if (hostname !== NodeOs.hostname()) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Liveness from the pid and host a run recorded when it started; `hold` records nothing more.
 *
 * @example
 * ```ts
 * import { RunLedger, RunLiveness } from "@corral/platform-node"
 * import { Effect, Layer } from "effect"
 *
 * const crashed = RunLiveness.markCrashed.pipe(
 *   Effect.provide(Layer.merge(RunLedger.layerSqlite(".corral/ledger.db"), RunLiveness.layerPid))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerPid: Layer.Layer<RunLiveness> = Layer.succeed(
  RunLiveness,
  RunLiveness.of({
    hold: () => Effect.void,
    alive: (runs) =>
      Effect.sync(() => new Set(runs.filter((run) => pidAlive(run.pid, run.hostname)).map((run) => run.runId)))
  })
)

/**
 * The rule that tells whether a recorded run's coordinator is alive, from the leases in `repo`'s run
 * registry, read once: a run with a lease is alive while its process runs (same host: its pid, and
 * its start time where recorded) or its heartbeat is recent (another host), as `corral gc` judges
 * it; a run with no lease there (one of another repository sharing the ledger, or one ending), or
 * every run when the registry cannot be read, by {@link pidAlive}.
 *
 * @since 0.1.0
 * @category liveness
 */
export const leaseRule = (repo: string): Effect.Effect<(run: RecordedRun) => boolean> =>
  RunRegistry.leases(repo).pipe(
    Effect.map((leases) => (run: RecordedRun) => leases.get(run.runId)?.live ?? pidAlive(run.pid, run.hostname)),
    Effect.orElseSucceed(() => (run: RecordedRun) => pidAlive(run.pid, run.hostname))
  )

/**
 * Liveness from each run's lease in `repo` (see {@link leaseRule}); `hold` records nothing more (a
 * run takes its lease with `Workspace.registerRun`).
 *
 * @example
 * ```ts
 * import { RunLedger, RunLiveness } from "@corral/platform-node"
 * import { Effect, Layer } from "effect"
 *
 * const crashed = RunLiveness.markCrashed.pipe(
 *   Effect.provide(Layer.merge(RunLedger.layerSqlite(".corral/ledger.db"), RunLiveness.layerLease(".")))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerLease = (repo: string): Layer.Layer<RunLiveness> =>
  Layer.succeed(
    RunLiveness,
    RunLiveness.of({
      hold: () => Effect.void,
      alive: (runs) =>
        runs.length === 0
          ? Effect.succeed(new Set<string>())
          : Effect.map(leaseRule(repo), (alive) => new Set(runs.filter(alive).map((run) => run.runId)))
    })
  )

/**
 * The status to show for a recorded run: `crashed` for a `running` run whose coordinator is gone.
 *
 * @since 0.1.0
 * @category liveness
 */
export const statusOf = (
  run: { readonly runId: string; readonly status: RunLedger.RunSummary["status"] },
  alive: ReadonlySet<string>
): RunLedger.RunSummary["status"] => (run.status === "running" && !alive.has(run.runId) ? "crashed" : run.status)

/**
 * Marks the `running` runs whose coordinator is gone as `crashed` (and their unfinished agents as
 * `Interrupted`, detail `crashed`) in the ledger; returns their ids. A run that starts meanwhile is
 * left alone.
 *
 * @since 0.1.0
 * @category liveness
 */
export const markCrashed: Effect.Effect<
  ReadonlyArray<string>,
  RunLedgerError,
  RunLiveness | RunLedger.RunLedger
> = Effect.gen(function* () {
  const ledger = yield* RunLedger.RunLedger
  const running = (yield* ledger.listRuns()).filter((run) => run.status === "running")
  if (running.length === 0) return []
  const alive = yield* (yield* RunLiveness).alive(running)
  const checked = new Set(running.map((run) => run.runId))
  return yield* ledger.markCrashed((_pid, _hostname, runId) => !checked.has(runId) || alive.has(runId))
})
