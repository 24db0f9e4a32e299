/**
 * The cluster entity that executes one agent of one run: entity id `<runId>/<agentId>~<salt>` (see
 * {@link placedEntityId}), one persisted `Execute` message per attempt. The shard that owns the
 * entity id lives on one runner; when that runner dies, the persisted message is delivered again to the shard's next owner
 * (at-least-once execution).
 *
 * @since 0.1.0
 */
import * as Executor from "@corral/core/Executor"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Semaphore from "effect/Semaphore"
import * as ClusterSchema from "effect/cluster/ClusterSchema"
import * as Entity from "effect/cluster/Entity"
import * as Rpc from "effect/rpc/Rpc"

/**
 * The wire form of `Executor.Request`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Request = Schema.Struct({
  kind: Schema.String,
  input: Schema.Unknown,
  runId: Schema.String,
  agentId: Schema.String,
  attempt: Schema.Number,
  fencingToken: Schema.optional(Schema.Number),
  requires: Schema.optional(Schema.String)
})

/**
 * The wire form of `Executor.Result`, plus the runner that executed it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Result = Schema.Union([
  Schema.TaggedStruct("Success", { value: Schema.Unknown, runner: Schema.String }),
  Schema.TaggedStruct("Failure", { error: Schema.Unknown, runner: Schema.String })
])

/**
 * One attempt of an agent. Its primary key is the attempt number, so within an entity
 * (`<runId>/<agentId>`) an attempt is one persisted message: sending it again (a resumed coordinator
 * taking over an execution, see `Cluster.ExecutorOptions.adopt`) returns the stored result or awaits
 * the running execution instead of starting a second one.
 *
 * @since 0.1.0
 * @category rpcs
 */
export const Execute = Rpc.make("Execute", {
  payload: Request.fields,
  success: Result,
  error: Executor.ExecutionError,
  primaryKey: (request) => String(request.attempt)
})

/**
 * @since 0.1.0
 * @category entities
 */
export const AgentEntity = Entity.make("CorralAgent", [Execute])
  .annotateRpcs(ClusterSchema.Persisted, true)
  .annotate(ClusterSchema.ShardGroup, (id) => {
    const placed = /~\d+(?:#([^#~]+))?$/.exec(id)
    if (placed !== null) return placed[1] === undefined ? "default" : shardGroupOf(placed[1])
    const at = id.lastIndexOf("#")
    return at < 0 ? "default" : shardGroupOf(id.slice(at + 1))
  })

/**
 * The shard group of the runners with `label`: a runner with labels takes the shards of their
 * groups besides the default group's, so an agent that requires a label only runs on such runners.
 *
 * @since 0.1.0
 * @category utils
 */
export const shardGroupOf = (label: string): string => `label:${label}`

/**
 * The entity id of an agent of a run, `<runId>/<agentId>`, with `#<label>` when it requires one.
 *
 * @since 0.1.0
 * @category utils
 */
export const entityId = (runId: string, agentId: string, requires?: string): string =>
  requires === undefined ? `${runId}/${agentId}` : `${runId}/${agentId}#${requires}`

/**
 * The entity id an attempt of an agent is sent to, `<runId>/<agentId>~<salt>` (with `#<label>` when
 * it requires one): the coordinator picks the salt so that the id hashes to a shard of the runner it
 * chose (load-aware placement). The agent's execution lease stays keyed by {@link entityId}, so
 * attempts at different salts are fenced against each other.
 *
 * @since 0.1.0
 * @category utils
 */
export const placedEntityId = (runId: string, agentId: string, requires: string | undefined, salt: number): string =>
  requires === undefined ? `${runId}/${agentId}~${salt}` : `${runId}/${agentId}~${salt}#${requires}`

/**
 * The shard group of an agent that requires `requires` (`"default"` when it requires none).
 *
 * @since 0.1.0
 * @category utils
 */
export const shardGroupFor = (requires: string | undefined): string =>
  requires === undefined ? "default" : shardGroupOf(requires)

/**
 * Options of a runner's handlers.
 *
 * @since 0.1.0
 * @category models
 */
export interface HandlerOptions {
  /** Most agents this runner executes at once; others wait in its mailbox. @default 8 */
  readonly capacity?: number | undefined
  /** Names this runner in results (e.g. `host:port`). */
  readonly runner: string
  /** Called when an execution starts and ends, for load reports. */
  readonly onLoad?: ((running: number) => void) | undefined
}

/**
 * An execution lease: the agent's entity id and the fencing token of this execution.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExecutionLease {
  readonly entity: string
  readonly fencingToken: number
}

/**
 * How a runner fences executions: before running an agent it takes the execution lease of the
 * agent's entity (so two runners never execute one agent at once), passes the lease's fencing token
 * to the handler as `Agent.current().fencingToken`, checks every `checkEvery` that the lease is
 * still current, and interrupts the handler (sending no result) once it is not. Giving the lease
 * back tells whether it was current until then; a result is sent only when it was.
 *
 * @since 0.1.0
 * @category models
 */
export interface Fence {
  /**
   * Waits until no other execution holds the lease of `entity`, and takes it; called uninterruptibly,
   * so it must be interruptible while it waits.
   */
  readonly acquire: (entity: string) => Effect.Effect<ExecutionLease>
  readonly isCurrent: (lease: ExecutionLease) => Effect.Effect<boolean>
  /** Gives the lease back; true when it was still current until then. */
  readonly release: (lease: ExecutionLease) => Effect.Effect<boolean>
  readonly checkEvery: Duration.Input
}

/**
 * The runner's {@link Fence}; without it in context, executions are not fenced.
 *
 * @since 0.1.0
 * @category services
 */
export class Fencing extends Context.Service<Fencing, Fence>()("@corral/cluster/AgentEntity/Fencing") {}

/** Runs `run` under the agent's execution lease; interrupted (no result) once the lease is lost. */
const fenced = <A, E>(
  fence: Fence,
  request: typeof Request.Type,
  run: (fencingToken: number) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const lease = yield* fence.acquire(entityId(request.runId, request.agentId, request.requires))
      const current = fence.isCurrent(lease)
      const lost = Effect.andThen(Effect.sleep(fence.checkEvery), current).pipe(
        Effect.repeat({ while: (ok) => ok }),
        Effect.andThen(Effect.interrupt)
      )
      const exit = yield* Effect.exit(
        restore(
          Effect.raceFirst(run(lease.fencingToken).pipe(Effect.provideService(Executor.StillCurrentRef, current)), lost)
        )
      )
      const wasCurrent = yield* fence.release(lease)
      if (Exit.isFailure(exit)) return yield* exit
      return wasCurrent ? exit.value : yield* Effect.interrupt
    })
  )

/**
 * Registers the entity on this runner: executes requests with the kinds registered here
 * (`Executor.layerKinds`), at most `capacity` at once, fenced when a {@link Fencing} is in context.
 *
 * @example
 * ```ts
 * import { AgentEntity } from "@corral/cluster"
 * import { AgentKind, Executor } from "@corral/core"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const Summarize = AgentKind.make("summarize", {
 *   input: Schema.Struct({ path: Schema.String }),
 *   output: Schema.Struct({ words: Schema.Number }),
 *   handler: ({ path }) => Effect.succeed({ words: path.length })
 * })
 *
 * // the handlers of runner 127.0.0.1:9001; `Cluster.layerRunner` provides the `Sharding` they need
 * const handlers = AgentEntity.layerHandlers({ runner: "127.0.0.1:9001", capacity: 8 }).pipe(
 *   Layer.provide(Executor.layerKinds([Summarize]))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerHandlers = (options: HandlerOptions) =>
  Layer.unwrap(
    Effect.sync(() => {
      // one semaphore and one count for the runner: the build below runs once per entity (agent)
      const permits = Semaphore.makeUnsafe(options.capacity ?? 8)
      let running = 0
      const track = (delta: number) =>
        Effect.sync(() => {
          running += delta
          options.onLoad?.(running)
        })
      return AgentEntity.toLayer(
        Effect.gen(function* () {
          const kinds = yield* Effect.service(Executor.Kinds)
          const fence = yield* Effect.serviceOption(Fencing)
          return AgentEntity.of({
            Execute: ({ payload }) =>
              permits.withPermits(1)(
                Effect.acquireUseRelease(
                  track(1),
                  () => {
                    const execute = (fencingToken: number | undefined) =>
                      Effect.map(kinds.run({ ...payload, fencingToken }), (result) =>
                        result._tag === "Success"
                          ? ({ _tag: "Success", value: result.value, runner: options.runner } as const)
                          : ({ _tag: "Failure", error: result.error, runner: options.runner } as const)
                      )
                    return fence._tag === "None" ? execute(payload.fencingToken) : fenced(fence.value, payload, execute)
                  },
                  () => track(-1)
                )
              )
          })
        }),
        // an agent's entity serves one request per attempt: idle entities only count towards
        // `maxResidentEntities`, beyond which a runner skips new ones
        { maxIdleTime: "5 seconds", concurrency: 1 }
      )
    })
  )
