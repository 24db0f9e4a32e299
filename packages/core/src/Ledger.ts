/**
 * A record of finished work by idempotency key. When a `Ledger` is in the context of `Corral.run`,
 * an agent whose key was recorded is not run again: its outcome is `Succeeded` with `cached: true`
 * and the recorded value. Only successes are recorded, so a rerun of a plan runs exactly the
 * agents that did not succeed before (and those whose inputs or dependencies' results changed).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Agent from "./Agent.ts"
import { hashValue } from "./internal/hash.ts"
import type * as Outcome from "./Outcome.ts"

/**
 * A recorded success.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly agentId: string
  readonly value: unknown
  readonly recordedAt: number
}

/**
 * The ledger could not be read or written. A run treats a failed lookup as a miss and logs a
 * failed record; neither changes an agent's outcome.
 *
 * @since 0.1.0
 * @category errors
 */
export class LedgerError extends Schema.TaggedError<LedgerError>()("LedgerError", {
  operation: Schema.Literals(["lookup", "record"]),
  key: Schema.String,
  message: Schema.String
}) {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly lookup: (key: string) => Effect.Effect<Option.Option<Entry>, LedgerError>
  readonly record: (key: string, outcome: Outcome.Succeeded) => Effect.Effect<void, LedgerError>
}

/**
 * The ledger service. Durable implementations live in platform packages.
 *
 * @since 0.1.0
 * @category services
 */
export class Ledger extends Context.Service<Ledger, Service>()("@corral/core/Ledger") {}

/**
 * An in-memory ledger (lives as long as the value); useful for tests and for reruns in one process.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (): Service => {
  const entries = new Map<string, Entry>()
  return {
    lookup: (key) => Effect.sync(() => Option.fromNullishOr(entries.get(key))),
    record: (key, outcome) =>
      Effect.sync(() => {
        entries.set(key, { agentId: outcome.agentId, value: outcome.value, recordedAt: outcome.endedAt })
      })
  }
}

/**
 * An in-memory ledger layer. Each time the layer is built it starts empty, and `Effect.provide`
 * builds it once per call: provide it once around every run that should share it (or share one
 * `makeMemory()` value with `Effect.provideService`). Providing it to two runs separately gives
 * them two empty ledgers.
 *
 * @example
 * ```ts
 * import { Agent, Corral, Ledger } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const agents = [Agent.make("a", { run: Effect.succeed(1) }), Agent.make("b", { run: Effect.fail("flaky") })]
 * const reruns = Effect.gen(function*() {
 *   const first = yield* Corral.run(agents)
 *   const second = yield* Corral.run(agents) // only the agents that did not succeed run again
 *   return [first, second]
 * }).pipe(Effect.provide(Ledger.layerMemory))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<Ledger> = Layer.sync(Ledger, makeMemory)

/**
 * The idempotency key of an agent given its dependencies' results: its `idempotencyKeyOf(deps)`,
 * else its `idempotencyKey`, else a hash of its id, `inputs` and `deps`. `undefined` when the
 * default key cannot be computed (cyclic values), which disables caching for the agent.
 *
 * @example
 * ```ts
 * import { Agent, Ledger } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const key = Ledger.keyOf(Agent.make("a", { run: Effect.void, inputs: ["model=gpt-5"] }), {})
 * ```
 * @since 0.1.0
 * @category keys
 */
export const keyOf = (agent: Agent.Any, deps: Agent.Deps): string | undefined => {
  if (agent.idempotencyKeyOf !== undefined) return agent.idempotencyKeyOf(deps)
  if (agent.idempotencyKey !== undefined) return agent.idempotencyKey
  const hash = hashValue({ id: agent.id, inputs: agent.inputs ?? [], deps })
  return hash === undefined ? undefined : `${agent.id}@${hash}`
}
