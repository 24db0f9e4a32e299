/**
 * corral on `effect/cluster`: runner processes that execute registered agent kinds, and a
 * coordinator whose `Executor` sends each agent to a runner with a free slot (load-aware placement:
 * it picks an entity id that hashes to one of that runner's shards, see `internal/placement.ts`).
 * Membership, shard locks and persisted messages live in Postgres (`SqlRunnerStorage`,
 * `SqlMessageStorage`); runners talk to each other over sockets (`NodeClusterSocket`) and publish
 * their capacity and shards in the runner registry (`RunnerRegistry`).
 *
 * The coordinator keeps scheduling (dependencies, claims, budgets, fail-fast) exactly as a local
 * `Corral.run`; only the `Executor` differs.
 *
 * @since 0.1.0
 */
import * as Executor from "@corral/core/Executor"
import { PostgresClient, PostgresOptions } from "@corral/postgres"
import { NodeClusterSocket } from "@effect/platform-node"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Hash from "effect/Hash"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
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
import { checkLabels } from "./internal/runnerLabels.ts"
import { Placement, type Ticket } from "./internal/placement.ts"
import * as RunnerRegistry from "./RunnerRegistry.ts"

/**
 * Settings shared by runners and coordinators; they must agree across the cluster. A setting a layer
 * cannot use (a duration that is not positive and finite or that effect would misread, such as
 * `{ seconds: true }`; a `capacity` below 1; a `port` outside 1–65535) makes building it die with
 * `PostgresOptions.InvalidOption` naming the option.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClusterOptions {
  /** The Postgres database holding membership, shard locks and messages. */
  readonly url: string
  /**
   * How long a runner that stops refreshing (killed, frozen, cut off) keeps its shards; its agents
   * are delivered again to the next owner after it. Above 0 and finite, like `refreshEvery`: a
   * duration the layers cannot use dies with `PostgresOptions.InvalidOption` naming it.
   * @default "10 seconds"
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
  /**
   * Agents that require one of these labels may run here (besides agents that require none). Each
   * is given once, is not empty, has no space at either end and contains no `#`, `~` or `,` (the
   * separators of entity ids and of `--labels`); another dies with `PostgresOptions.InvalidOption`.
   */
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

/** {@link ClusterOptions}' durations in milliseconds, defaults filled in. */
interface Timing {
  readonly expirationMs: number
  readonly refreshMs: number
}

const checkTiming = (options: ClusterOptions): Effect.Effect<Timing> =>
  Effect.all({
    expirationMs: PostgresOptions.duration(
      "Cluster",
      "shardLockExpiration",
      options.shardLockExpiration ?? defaults.shardLockExpiration,
      true
    ),
    refreshMs: PostgresOptions.duration("Cluster", "refreshEvery", options.refreshEvery ?? defaults.refreshEvery, true)
  })

/**
 * The `effect/cluster` settings corral passes (the rest are `ShardingConfig.defaults`). Requests
 * reach their runner by a direct notification after they are persisted; the polls below only cover
 * what a notification missed.
 */
const shardingConfig = (timing: Timing) => {
  const refresh = Duration.millis(timing.refreshMs)
  return {
    shardLockExpiration: Duration.millis(timing.expirationMs),
    shardLockRefreshInterval: Duration.millis(timing.expirationMs / 3),
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
const layerFencing = (timing: Timing) => {
  const ttl = Duration.millis(timing.expirationMs)
  return Layer.effectContext(
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
      const fencing = AgentEntity.Fencing.of({
        acquire: leases.acquire,
        isCurrent: (lease) => orLost(leases.isCurrent(lease)),
        release: (lease) =>
          orLost(leases.release(lease)).pipe(
            Effect.timeoutOption("5 seconds"),
            Effect.map((current) => current._tag === "Some" && current.value)
          ),
        checkEvery: Duration.divideUnsafe(ttl, 4)
      })
      return Context.make(AgentEntity.Fencing, fencing).pipe(Context.add(ExecutionLeases.LeaseOwner, leases.owner))
    })
  )
}

/**
 * A runner: joins the cluster at `host:port`, takes shards, registers in the runner registry
 * (capacity, labels, load and the shards it holds, which coordinators place agents by), and
 * executes the agents sent to them with the kinds registered in this process
 * (`Executor.layerKinds`). Each execution holds the execution lease of its agent
 * `<runId>/<agentId>` (table `corral_executions`, TTL
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
export const layerRunner = (options: RunnerOptions) =>
  Layer.unwrap(
    Effect.all({
      timing: checkTiming(options),
      port: PostgresOptions.wholeNumber("Cluster", "port", options.port, 1, 65_535),
      capacity: PostgresOptions.wholeNumber("Cluster", "capacity", options.capacity ?? defaults.capacity, 1),
      labels: checkLabels("Cluster", options.labels ?? [])
    }).pipe(Effect.map((checked) => runnerLayer(options, checked)))
  )

/** {@link layerRunner} once its settings are checked. */
const runnerLayer = (
  options: RunnerOptions,
  {
    timing,
    port,
    capacity,
    labels
  }: {
    readonly timing: Timing
    readonly port: number
    readonly capacity: number
    readonly labels: ReadonlyArray<string>
  }
) => {
  const host = options.host ?? "127.0.0.1"
  const groups = ["default", ...labels.map(AgentEntity.shardGroupOf)]
  const address = `${host}:${port}`
  let running = 0
  const handlers = AgentEntity.layerHandlers({
    runner: address,
    capacity,
    onLoad: (n) => {
      running = n
      options.onLoad?.(n)
    }
  })
  const registration = Layer.effectDiscard(
    Effect.gen(function* () {
      const sharding = yield* Sharding.Sharding
      const config = yield* Effect.serviceOption(ShardingConfig.ShardingConfig)
      const perGroup = Option.isSome(config) ? config.value.shardsPerGroup : ShardingConfig.defaults.shardsPerGroup
      const shards = () => {
        const held: Record<string, Array<number>> = {}
        for (const group of groups) {
          const ids: Array<number> = []
          for (let id = 1; id <= perGroup; id++) if (sharding.hasShardId(ShardId.make(group, id))) ids.push(id)
          if (ids.length > 0) held[group] = ids
        }
        return held
      }
      yield* RunnerRegistry.register({
        address,
        capacity,
        labels,
        leaseOwner: yield* ExecutionLeases.LeaseOwner,
        running: () => running,
        shards
      })
    })
  )
  return Layer.merge(handlers, registration).pipe(
    Layer.provide(layerFencing(timing)),
    Layer.provideMerge(
      NodeClusterSocket.layer({
        storage: "sql",
        shardingConfig: {
          ...shardingConfig(timing),
          availableShardGroups: groups,
          assignedShardGroups: groups,
          runnerAddress: Option.some(RunnerAddress.make(host, port))
        }
      })
    ),
    Layer.provide(PostgresClient.layer(options.url, { applicationName: `corral-runner ${address}` })),
    PostgresClient.startingLayer("Cluster.layerRunner")
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
   * as the latest attempt persisted for it under those runs (same entity, same primary key; each run's
   * attempts are numbered on from the one it resumed), so it returns that execution's stored result,
   * or awaits it while a runner still runs it (or runs it again after that runner died:
   * at-least-once), instead of starting a second execution beside it; its later attempts continue
   * that numbering. An agent with no persisted attempt runs as usual.
   */
  readonly adopt?: ReadonlyMap<string, ReadonlyArray<string>> | undefined
  /**
   * Told the attempt an agent's first execution adopted; its later attempts are numbered on from it
   * (a run's retry policy can then count the attempts the crashed runs made).
   */
  readonly onAdopt?: ((agentId: string, attempt: number) => void) | undefined
}

const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)
const regexEscape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * The entity ids an agent of `runId` was sent to: every `<runId>/<agentId>~<salt>` (with its label)
 * that `effect/cluster`'s message table (`cluster_messages`) holds a message for, and the unsalted
 * `<runId>/<agentId>` of runs placed before load-aware placement.
 */
const entitiesOf = (sql: SqlClient.SqlClient, runId: string, request: Executor.Request) =>
  Effect.gen(function* () {
    const base = `${runId}/${request.agentId}`
    const rows = yield* sql<{ entity_id: string }>`SELECT DISTINCT entity_id FROM cluster_messages
      WHERE entity_type = ${AgentEntity.AgentEntity.type} AND entity_id LIKE ${`${likeEscape(base)}~%`}`
    const label = request.requires === undefined ? "" : `#${regexEscape(request.requires)}`
    const placed = new RegExp(`^${regexEscape(base)}~\\d+${label}$`)
    return [
      AgentEntity.entityId(runId, request.agentId, request.requires),
      ...rows.map((row) => row.entity_id).filter((id) => placed.test(id))
    ]
  })

/**
 * The highest attempt persisted for `agentId` in `runId` above `after`, and the entity it was sent to
 * (`after` and no entity when none): a resumed run's own attempts are numbered on from those of the
 * runs it resumes.
 */
const latestAttempt = (
  sharding: Sharding.Sharding["Service"],
  storage: MessageStorage.MessageStorage["Service"],
  sql: SqlClient.SqlClient,
  runId: string,
  request: Executor.Request,
  after: number
) =>
  Effect.gen(function* () {
    const addresses = (yield* entitiesOf(sql, runId, request)).map((id) => {
      const entityId = EntityId.make(id)
      return EntityAddress.make({
        shardId: sharding.getShardId(entityId, AgentEntity.AgentEntity.getShardGroup(entityId)),
        entityType: AgentEntity.AgentEntity.type,
        entityId
      })
    })
    let found: { readonly attempt: number; readonly entityId: string } = { attempt: after, entityId: "" }
    while (true) {
      const attempt = found.attempt + 1
      let at: string | undefined
      for (const address of addresses) {
        const id = yield* storage.requestIdForPrimaryKey({ address, tag: "Execute", id: String(attempt) })
        if (Option.isSome(id)) at = address.entityId
      }
      if (at === undefined) return found
      found = { attempt, entityId: at }
    }
  })

/**
 * An agent's first execution in a resumed run: the latest attempt persisted under the runs it resumes
 * (oldest first, each numbering on from the one before) and the entity it was sent to, if any.
 */
const adoption = (
  sharding: Sharding.Sharding["Service"],
  storage: MessageStorage.MessageStorage["Service"],
  sql: SqlClient.SqlClient,
  runs: ReadonlyArray<string>,
  request: Executor.Request
): Effect.Effect<{ readonly request: Executor.Request; readonly entityId?: string }> =>
  Effect.gen(function* () {
    let found = 0
    let holder: { readonly runId: string; readonly entityId: string } | undefined
    for (const runId of [...runs].reverse()) {
      const latest = yield* latestAttempt(sharding, storage, sql, runId, request, found)
      if (latest.attempt > found) {
        found = latest.attempt
        holder = { runId, entityId: latest.entityId }
      }
    }
    return holder === undefined
      ? { request }
      : { request: { ...request, runId: holder.runId, attempt: found }, entityId: holder.entityId }
  }).pipe(
    Effect.catch((error) =>
      Effect.as(
        Effect.logWarning(
          `corral: could not look up the persisted executions of agent ${request.agentId}; running it again`,
          error.message
        ),
        { request }
      )
    )
  )

/**
 * The shard number of an entity id, for placement's salt search (dozens of ids per attempt):
 * `Sharding.getShardId`'s formula (`Hash.string` of the id, modulo the shards per group, plus one)
 * without the `EntityId` and `ShardId` values it makes per call. Checked against `getShardId` on 64
 * ids; where they differ (another effect version), `getShardId` itself is used.
 */
const shardOfFor = (sharding: Sharding.Sharding["Service"]) =>
  Effect.map(Effect.serviceOption(ShardingConfig.ShardingConfig), (config) => {
    const perGroup = Option.isSome(config) ? config.value.shardsPerGroup : ShardingConfig.defaults.shardsPerGroup
    const fast = (id: string) => Math.abs(Hash.string(id) % perGroup) + 1
    const slow = (id: string, group: string) => sharding.getShardId(EntityId.make(id), group).id
    const same = Array.from({ length: 64 }, (_, i) => `2026-11-26T21:54:28Z-ü/agent-${i * 7919}~${i}`).every(
      (id) => fast(id) === slow(id, "default")
    )
    return same ? fast : slow
  })

/**
 * Load-aware placement over the runner registry (see `internal/placement.ts`): `place` waits until
 * an eligible runner has a free slot and returns the entity id to send to, counted until the
 * returned release runs.
 */
const makePlacer = (refreshMs: number) =>
  Effect.gen(function* () {
    const sharding = yield* Sharding.Sharding
    const sql = yield* SqlClient.SqlClient
    const placement = new Placement(yield* shardOfFor(sharding))
    // Attempts waiting for a free slot, oldest first. A release or a new view wakes as many of a
    // group's waiters as its runners have free slots; a woken waiter places itself (or
    // waits again when a newcomer took the slot). Placing and queueing happen in one synchronous
    // step, so no wake-up is lost, and only the wait is interruptible.
    let waiting: Array<{ readonly group: string; readonly wake: Deferred.Deferred<void> }> = []
    const wake = () => {
      if (waiting.length === 0) return
      const left = new Map<string, number>()
      waiting = waiting.filter((waiter) => {
        // a group no runner holds any more is sent at once, uncounted
        const free =
          left.get(waiter.group) ??
          (placement.eligible(waiter.group).length === 0 ? Number.POSITIVE_INFINITY : placement.available(waiter.group))
        if (free <= 0) return true
        left.set(waiter.group, free - 1)
        Deferred.doneUnsafe(waiter.wake, Exit.void)
        return false
      })
    }
    let migrated = false
    // warned once per outage, not at every refresh while the server is away (those log at debug level)
    let failing = false
    const refresh = Effect.suspend(() => RunnerRegistry.placements(5_000, { migrate: !migrated })).pipe(
      Effect.flatMap((view) =>
        Effect.suspend(() => {
          migrated = true
          placement.setView(view)
          wake()
          if (!failing) return Effect.void
          failing = false
          return Effect.logInfo("corral: reading the runner registry for placement works again")
        })
      ),
      Effect.catch((error) => {
        if (failing)
          return Effect.logDebug("corral: reading the runner registry for placement still fails", error.message)
        failing = true
        return Effect.logWarning("corral: reading the runner registry for placement failed", error.message)
      }),
      Effect.provideService(SqlClient.SqlClient, sql)
    )
    yield* refresh
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(refreshMs), refresh)))
    const place = (request: Executor.Request): Effect.Effect<Ticket> =>
      Effect.suspend(() => {
        const group = AgentEntity.shardGroupFor(request.requires)
        const ticket = placement.tryPlace(group, (salt) =>
          AgentEntity.placedEntityId(request.runId, request.agentId, request.requires, salt)
        )
        if (ticket !== "full") return Effect.succeed(ticket)
        const waiter = { group, wake: Deferred.makeUnsafe<void>() }
        waiting.push(waiter)
        return Effect.interruptible(Deferred.await(waiter.wake)).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              waiting = waiting.filter((other) => other !== waiter)
              // it may have been woken for a free slot: offer that slot to the next waiter
              wake()
            })
          ),
          Effect.andThen(Effect.suspend(() => place(request)))
        )
      })
    const release = (ticket: Ticket) =>
      Effect.sync(() => {
        placement.release(ticket)
        wake()
      })
    return { place, release }
  })

const placed = (
  placer: Effect.Success<ReturnType<typeof makePlacer>>,
  clientFor: Effect.Success<typeof AgentEntity.AgentEntity.client>,
  request: Executor.Request
) =>
  Effect.acquireUseRelease(placer.place(request), (ticket) => send(clientFor, request, ticket.entityId), placer.release)

/**
 * The executor over the `Sharding` in context: each request becomes a persisted `Execute` message to
 * an entity `<runId>/<agentId>~<salt>` placed on a runner with a free slot (load-aware placement),
 * with the attempt as its primary key; `adopt` names executions a resumed coordinator takes over
 * (see {@link ExecutorOptions.adopt}). An agent whose first execution adopted attempt `n` sends its
 * later attempts as `n + 1`, `n + 2`, ... (its attempts continue rather than restart at 1);
 * `onAdopt` is told `n`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeExecutor = (
  options: ExecutorOptions
): Effect.Effect<
  Executor.Executor["Service"],
  never,
  Sharding.Sharding | MessageStorage.MessageStorage | SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function* () {
    const timing = yield* checkTiming(options)
    const clientFor = yield* AgentEntity.AgentEntity.client
    const sharding = yield* Sharding.Sharding
    const storage = yield* MessageStorage.MessageStorage
    const sql = yield* SqlClient.SqlClient
    const placer = yield* makePlacer(timing.refreshMs)
    const pending = new Map(options.adopt ?? [])
    const offsets = new Map<string, number>()
    return Executor.Executor.of({
      execute: (request) => {
        const runs = pending.get(request.agentId)
        if (runs === undefined) {
          const offset = offsets.get(request.agentId)
          return placed(
            placer,
            clientFor,
            offset === undefined ? request : { ...request, attempt: request.attempt + offset }
          )
        }
        pending.delete(request.agentId)
        return Effect.flatMap(adoption(sharding, storage, sql, runs, request), (adopted) => {
          if (adopted.entityId === undefined) return placed(placer, clientFor, adopted.request)
          offsets.set(request.agentId, adopted.request.attempt - request.attempt)
          options.onAdopt?.(request.agentId, adopted.request.attempt)
          return send(clientFor, adopted.request, adopted.entityId)
        })
      }
    })
  })

const send = (
  clientFor: Effect.Success<typeof AgentEntity.AgentEntity.client>,
  request: Executor.Request,
  entityId: string
): Effect.Effect<Executor.Result, Executor.ExecutionError> =>
  clientFor(entityId)
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
 * A coordinator's `Executor`: joins the cluster as a client only (it takes no shards) and sends
 * each attempt to the eligible runner with the most free slots, waiting while every one is full
 * (see {@link makeExecutor}).
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
  Layer.unwrap(
    Effect.map(checkTiming(options), (timing) =>
      Layer.effect(Executor.Executor, makeExecutor(options)).pipe(
        Layer.provide(
          NodeClusterSocket.layer({ clientOnly: true, storage: "sql", shardingConfig: shardingConfig(timing) })
        ),
        Layer.provide(PostgresClient.layer(options.url, { applicationName: "corral-coordinator" })),
        PostgresClient.startingLayer("Cluster.layerExecutor")
      )
    )
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
