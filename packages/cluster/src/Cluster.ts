/**
 * corral on `effect/cluster`: runner processes that execute registered agent kinds, and a
 * coordinator whose `Executor` sends each agent to the runner that owns its shard. Membership,
 * shard locks and persisted messages live in Postgres (`SqlRunnerStorage`, `SqlMessageStorage`);
 * runners talk to each other over sockets (`NodeClusterSocket`).
 *
 * The coordinator keeps scheduling (dependencies, claims, budgets, fail-fast) exactly as a local
 * `Corral.run`; only the `Executor` differs.
 *
 * @since 0.1.0
 */
import * as Executor from "@corral/core/Executor"
import { PostgresClient } from "@corral/postgres"
import { NodeClusterSocket } from "@effect/platform-node"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as SqlError from "effect/sql/SqlError"
import * as EntityAddress from "effect/cluster/EntityAddress"
import * as EntityId from "effect/cluster/EntityId"
import * as MessageStorage from "effect/cluster/MessageStorage"
import * as RunnerAddress from "effect/cluster/RunnerAddress"
import * as ShardId from "effect/cluster/ShardId"
import * as Sharding from "effect/cluster/Sharding"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as AgentEntity from "./AgentEntity.ts"
import * as ExecutionLeases from "./internal/executionLeases.ts"

/**
 * Settings shared by runners and coordinators; they must agree across the cluster.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClusterOptions {
  /** The Postgres database holding membership, shard locks and messages. */
  readonly url: string
  /**
   * How long a runner that stops refreshing (killed, frozen, cut off) keeps its shards; its agents
   * are delivered again to the next owner after it. @default "10 seconds"
   */
  readonly shardLockExpiration?: Duration.Input | undefined
  /** How often runners and coordinators look for new runners and shard owners. @default "1 second" */
  readonly refreshEvery?: Duration.Input | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RunnerOptions extends ClusterOptions {
  /** The address other runners and coordinators reach this runner at. @default "127.0.0.1" */
  readonly host?: string | undefined
  readonly port: number
  /** Most agents this runner executes at once. @default 8 */
  readonly capacity?: number | undefined
  /** Agents that require one of these labels may run here (besides agents that require none). */
  readonly labels?: ReadonlyArray<string> | undefined
  readonly onLoad?: ((running: number) => void) | undefined
}

/**
 * The defaults of {@link ClusterOptions} and {@link RunnerOptions}.
 *
 * @example
 * ```ts
 * import { Cluster } from "@corral/cluster"
 * import { Duration } from "effect"
 *
 * // a runner that stops refreshing loses its shards and execution leases after this long
 * const ttl = Duration.fromInputUnsafe(Cluster.defaults.shardLockExpiration)
 * ```
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  shardLockExpiration: "10 seconds",
  refreshEvery: "1 second",
  capacity: 8
} as const

/**
 * The `effect/cluster` settings corral passes (the rest are `ShardingConfig.defaults`). Requests
 * reach their runner by a direct notification after they are persisted; the polls below only cover
 * what a notification missed.
 */
const shardingConfig = (options: ClusterOptions) => {
  const expiration = Duration.fromInputUnsafe(options.shardLockExpiration ?? defaults.shardLockExpiration)
  const refresh = options.refreshEvery ?? defaults.refreshEvery
  return {
    shardLockExpiration: expiration,
    shardLockRefreshInterval: Duration.divideUnsafe(expiration, 3),
    refreshAssignmentsInterval: refresh,
    runnerHealthCheckInterval: refresh,
    entityMessagePollInterval: "100 millis",
    entityReplyPollInterval: "100 millis",
    sendRetryInterval: "100 millis"
  } as const
}

/**
 * Execution leases (`corral_executions` on the cluster's database), with a TTL of
 * `shardLockExpiration`: a runner that is stopped or cut off for longer loses them (and its shards)
 * together. A lease check that fails six times, 200 ms apart, counts as lost, and so does a lease
 * that cannot be given back within 5 seconds (its execution's result is not sent).
 */
const layerFencing = (options: ClusterOptions) => {
  const ttl = Duration.fromInputUnsafe(options.shardLockExpiration ?? defaults.shardLockExpiration)
  return Layer.effect(
    AgentEntity.Fencing,
    Effect.gen(function* () {
      const leases = yield* ExecutionLeases.make({
        ttl,
        renewEvery: Duration.divideUnsafe(ttl, 3),
        retryEvery: "100 millis"
      })
      const orLost = (check: Effect.Effect<boolean, SqlError.SqlError>) =>
        check.pipe(
          Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 5 }),
          Effect.orElseSucceed(() => false)
        )
      return AgentEntity.Fencing.of({
        acquire: leases.acquire,
        isCurrent: (lease) => orLost(leases.isCurrent(lease)),
        release: (lease) =>
          orLost(leases.release(lease)).pipe(
            Effect.timeoutOption("5 seconds"),
            Effect.map((current) => current._tag === "Some" && current.value)
          ),
        checkEvery: Duration.divideUnsafe(ttl, 4)
      })
    })
  )
}

/**
 * A runner: joins the cluster at `host:port`, takes shards, and executes the agents sent to them
 * with the kinds registered in this process (`Executor.layerKinds`). Each execution holds the
 * execution lease of its entity `<runId>/<agentId>` (table `corral_executions`, TTL
 * `shardLockExpiration`): a re-delivered agent starts on its new runner only once the old
 * execution's lease is released, lapsed or its runner's session gone, its handler sees that lease's
 * fencing token, and an execution whose lease was lost is interrupted without a result.
 *
 * @example
 * ```ts
 * import { Cluster } from "@corral/cluster"
 * import { AgentKind, Executor } from "@corral/core"
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 *
 * const runner = Cluster.layerRunner({ url: "postgres://postgres@127.0.0.1:5432/corral", port: 9001, capacity: 8 }).pipe(
 *   Layer.provide(Executor.layerKinds([Summarize]))
 * )
 * NodeRuntime.runMain(Layer.launch(runner)) // serves until interrupted (Ctrl-C)
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerRunner = (options: RunnerOptions) => {
  const host = options.host ?? "127.0.0.1"
  const groups = ["default", ...(options.labels ?? []).map(AgentEntity.shardGroupOf)]
  return AgentEntity.layerHandlers({
    runner: `${host}:${options.port}`,
    capacity: options.capacity ?? defaults.capacity,
    onLoad: options.onLoad
  }).pipe(
    Layer.provide(layerFencing(options)),
    Layer.provideMerge(
      NodeClusterSocket.layer({
        storage: "sql",
        shardingConfig: {
          ...shardingConfig(options),
          availableShardGroups: groups,
          assignedShardGroups: groups,
          runnerAddress: Option.some(RunnerAddress.make(host, options.port))
        }
      })
    ),
    Layer.provide(PostgresClient.layer(options.url, { applicationName: `corral-runner ${host}:${options.port}` }))
  )
}

const unavailable = (request: Executor.Request, message: string) =>
  new Executor.ExecutionError({ kind: request.kind, agentId: request.agentId, reason: "Unavailable", message })

/**
 * Options of a coordinator's executor.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExecutorOptions extends ClusterOptions {
  /**
   * Executions a resumed coordinator takes over, by agent id: the runs (newest first) whose
   * coordinator died while the agent had no outcome. The agent's first execution in this run is sent
   * as the latest attempt persisted for it under the first of those runs that has one (same entity,
   * same primary key), so it returns that execution's stored result, or awaits it while a runner
   * still runs it (or runs it again after that runner died: at-least-once), instead of starting a
   * second execution beside it. An agent with no persisted attempt runs as usual.
   */
  readonly adopt?: ReadonlyMap<string, ReadonlyArray<string>> | undefined
}

/** The highest attempt persisted for the entity of `agentId` in `runId` (0 when none). */
const latestAttempt = (
  sharding: Sharding.Sharding["Service"],
  storage: MessageStorage.MessageStorage["Service"],
  runId: string,
  request: Executor.Request
) =>
  Effect.gen(function* () {
    const entityId = EntityId.make(AgentEntity.entityId(runId, request.agentId, request.requires))
    const address = EntityAddress.make({
      shardId: sharding.getShardId(entityId, AgentEntity.AgentEntity.getShardGroup(entityId)),
      entityType: AgentEntity.AgentEntity.type,
      entityId
    })
    let found = 0
    while (true) {
      const id = yield* storage.requestIdForPrimaryKey({ address, tag: "Execute", id: String(found + 1) })
      if (Option.isNone(id)) return found
      found++
    }
  })

/** The request to send for an agent's first execution in a resumed run: an adopted attempt, if any. */
const adoption = (
  sharding: Sharding.Sharding["Service"],
  storage: MessageStorage.MessageStorage["Service"],
  runs: ReadonlyArray<string>,
  request: Executor.Request
): Effect.Effect<Executor.Request> =>
  Effect.gen(function* () {
    for (const runId of runs) {
      const attempt = yield* latestAttempt(sharding, storage, runId, request)
      if (attempt > 0) return { ...request, runId, attempt }
    }
    return request
  }).pipe(
    Effect.catch((error) =>
      Effect.as(
        Effect.logWarning(
          `corral: could not look up the persisted executions of agent ${request.agentId}; running it again`,
          error.message
        ),
        request
      )
    )
  )

/**
 * The executor over the `Sharding` in context: each request becomes a persisted `Execute` message to
 * the entity `<runId>/<agentId>`, with the attempt as its primary key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeExecutor: Effect.Effect<Executor.Executor["Service"], never, Sharding.Sharding> = Effect.gen(
  function* () {
    const clientFor = yield* AgentEntity.AgentEntity.client
    return Executor.Executor.of({ execute: (request) => send(clientFor, request) })
  }
)

const send = (
  clientFor: Effect.Success<typeof AgentEntity.AgentEntity.client>,
  request: Executor.Request
): Effect.Effect<Executor.Result, Executor.ExecutionError> =>
  clientFor(AgentEntity.entityId(request.runId, request.agentId, request.requires))
    .Execute({
      kind: request.kind,
      input: request.input,
      runId: request.runId,
      agentId: request.agentId,
      attempt: request.attempt,
      ...(request.fencingToken === undefined ? {} : { fencingToken: request.fencingToken }),
      ...(request.requires === undefined ? {} : { requires: request.requires })
    })
    .pipe(
      Effect.map(
        (result): Executor.Result =>
          result._tag === "Success"
            ? { _tag: "Success", value: result.value }
            : { _tag: "Failure", error: result.error }
      ),
      Effect.catch((error) =>
        error._tag === "ExecutionError" ? Effect.fail(error) : Effect.fail(unavailable(request, error.message))
      )
    )

/**
 * {@link makeExecutor} that takes over the executions named by `adopt` (see
 * {@link ExecutorOptions.adopt}).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeAdoptingExecutor = (
  adopt: ReadonlyMap<string, ReadonlyArray<string>>
): Effect.Effect<Executor.Executor["Service"], never, Sharding.Sharding | MessageStorage.MessageStorage> =>
  Effect.gen(function* () {
    const clientFor = yield* AgentEntity.AgentEntity.client
    const sharding = yield* Sharding.Sharding
    const storage = yield* MessageStorage.MessageStorage
    const pending = new Map(adopt)
    return Executor.Executor.of({
      execute: (request) => {
        const runs = pending.get(request.agentId)
        if (runs === undefined) return send(clientFor, request)
        pending.delete(request.agentId)
        return Effect.flatMap(adoption(sharding, storage, runs, request), (adopted) => send(clientFor, adopted))
      }
    })
  })

/**
 * A coordinator's `Executor`: joins the cluster as a client only (it takes no shards) and sends
 * agents to runners.
 *
 * @example
 * ```ts
 * import { Cluster } from "@corral/cluster"
 * import { AgentKind, Corral } from "@corral/core"
 * import { Effect, Schema } from "effect"
 *
 * // the same definition as on the runners; the coordinator only encodes inputs and decodes outputs
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 *
 * const agents = ["a.md", "b.md"].map((path) => AgentKind.agent(Summarize, path, { path }))
 * const program = Corral.run(agents).pipe(
 *   Effect.provide(Cluster.layerExecutor({ url: "postgres://postgres@127.0.0.1:5432/corral" }))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerExecutor = (options: ExecutorOptions) =>
  Layer.effect(
    Executor.Executor,
    options.adopt === undefined || options.adopt.size === 0 ? makeExecutor : makeAdoptingExecutor(options.adopt)
  ).pipe(
    Layer.provide(
      NodeClusterSocket.layer({ clientOnly: true, storage: "sql", shardingConfig: shardingConfig(options) })
    ),
    Layer.provide(PostgresClient.layer(options.url, { applicationName: "corral-coordinator" }))
  )

/**
 * How many shards this runner holds now (of `shardsPerGroup` in the default group).
 *
 * @example
 * ```ts
 * import { Cluster } from "@corral/cluster"
 * import { Executor } from "@corral/core"
 * import { Effect, Layer } from "effect"
 *
 * const runner = Cluster.layerRunner({ url: "postgres://postgres@127.0.0.1:5432/corral", port: 9001 }).pipe(
 *   Layer.provide(Executor.layerKinds([]))
 * )
 * const program = Effect.gen(function*() {
 *   const held = yield* Cluster.ownedShards // 0 until the runner's first assignment
 *   yield* Effect.log(`this runner holds ${held} shards`)
 * }).pipe(Effect.provide(runner))
 * ```
 * @since 0.1.0
 * @category accessors
 */
export const ownedShards: Effect.Effect<number, never, Sharding.Sharding> = Effect.gen(function* () {
  const sharding = yield* Sharding.Sharding
  const config = yield* Effect.serviceOption(ShardingConfig.ShardingConfig)
  const shards = Option.isSome(config) ? config.value.shardsPerGroup : ShardingConfig.defaults.shardsPerGroup
  let held = 0
  for (let id = 1; id <= shards; id++) if (sharding.hasShardId(ShardId.make("default", id))) held++
  return held
})
