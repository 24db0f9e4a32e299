/**
 * Plans: agents added one by one, where an agent's `run` receives its dependencies' results typed
 * by the agents that produce them, plus `analyze` for the shape of a plan before it runs (order,
 * critical path, parallelism, claim conflicts).
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import { Class as PipeableClass, type Pipeable } from "effect/Pipeable"
import * as Result from "effect/Result"
import * as Agent from "./Agent.ts"
import type * as Claims from "./Claims.ts"
import * as Corral from "./Corral.ts"
import type { InvalidRun } from "./CorralError.ts"
import type * as Outcome from "./Outcome.ts"
import * as analysis from "./internal/analysis.ts"
import { validate } from "./internal/validate.ts"
import type { RunResult } from "./RunResult.ts"

/**
 * @since 0.1.0
 * @category symbols
 */
export const TypeId = "~@corral/core/Plan" as const

/**
 * The results of the dependencies `Deps` of an agent in a plan whose results are `Results`.
 *
 * @since 0.1.0
 * @category type-level
 */
export type DepsOf<Results, Deps extends ReadonlyArray<keyof Results>> = { readonly [K in Deps[number]]: Results[K] }

/**
 * Options of an agent added to a plan: those of `Agent.make`, with `dependsOn` limited to agents
 * already in the plan and `run` typed by them.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentOptions<Results, Deps extends ReadonlyArray<keyof Results & string>, A, E, R>
  extends Omit<Agent.Options<A, E, R>, "run" | "dependsOn" | "idempotencyKeyOf"> {
  readonly dependsOn?: Deps | undefined
  readonly run: Effect.Effect<A, E, R> | ((deps: DepsOf<Results, Deps>) => Effect.Effect<A, E, R>)
  readonly idempotencyKeyOf?: ((deps: DepsOf<Results, Deps>) => string) | undefined
}

/**
 * What the compiler shows for an id that is already in the plan: `Argument of type '"a"' is not
 * assignable to parameter of type '"a" & DuplicateId<"a">'`.
 *
 * @since 0.1.0
 * @category type-level
 */
export interface DuplicateId<Id extends string> {
  readonly "this id is already in the plan": Id
}

/**
 * A plan whose agents succeed with `Results[id]`, fail with `E` and need `R`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan<Results extends Record<string, unknown> = {}, E = never, R = never> extends Pipeable {
  readonly [TypeId]: typeof TypeId
  /** The agents, in the order they were added; pass them to `Corral.run`. */
  readonly agents: ReadonlyArray<Agent.Agent<Results[keyof Results], E, R>>
  /** Adds an agent. Its id must be new; `dependsOn` may name only agents already in the plan. */
  agent<
    Id extends string,
    A,
    E2 = never,
    R2 = never,
    const Deps extends ReadonlyArray<keyof Results & string> = readonly []
  >(
    id: Id & (string extends keyof Results ? unknown : Id extends keyof Results ? DuplicateId<Id> : unknown),
    options: AgentOptions<Results, Deps, A, E2, R2>
  ): Plan<Results & { readonly [K in Id]: A }, E | E2, R | R2>
}

/**
 * The results of a plan's agents by id.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Results<P> = P extends Plan<infer Results, infer _E, infer _R> ? Results : never

class PlanImpl extends PipeableClass implements Plan<any, any, any> {
  readonly [TypeId] = TypeId
  readonly agents: ReadonlyArray<Agent.Any>
  constructor(agents: ReadonlyArray<Agent.Any>) {
    super()
    this.agents = agents
  }
  agent(id: string, options: AgentOptions<any, any, any, any, any>): Plan<any, any, any> {
    return new PlanImpl([...this.agents, Agent.make(id, options as Agent.Options<any, any, any>)])
  }
}

/**
 * An empty plan.
 *
 * @example
 * ```ts
 * import { Plan } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const plan = Plan.make()
 *   .agent("research", { run: Effect.succeed({ notes: "..." }) })
 *   .agent("outline", {
 *     dependsOn: ["research"],
 *     run: ({ research }) => Effect.succeed(research.notes.split("\n"))
 *   })
 * const result = Plan.run(plan, { concurrency: 4 })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (): Plan => new PlanImpl([]) as Plan

/**
 * Runs a plan's agents with `Corral.run`.
 *
 * @since 0.1.0
 * @category running
 */
export const run = <Results extends Record<string, unknown>, E, R>(
  plan: Plan<Results, E, R>,
  options?: Corral.Options
): Effect.Effect<PlanResult<Results, E>, InvalidRun, R> =>
  Corral.run(plan.agents, options) as Effect.Effect<PlanResult<Results, E>, InvalidRun, R>

/**
 * The result of `Plan.run`: a `RunResult` whose `get(id)` takes only the plan's ids and gives that
 * agent's outcome with its own success type.
 *
 * @example
 * ```ts
 * import { Plan } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const plan = Plan.make()
 *   .agent("count", { run: Effect.succeed(3) })
 *   .agent("summary", { dependsOn: ["count"], run: ({ count }) => Effect.succeed(`${count} files`) })
 * const program = Effect.gen(function*() {
 *   const result = yield* Plan.run(plan)
 *   const summary = result.get("summary") // Outcome<string, never>
 *   return summary._tag === "Succeeded" ? summary.value : "no summary"
 * })
 * ```
 * @since 0.1.0
 * @category models
 */
export interface PlanResult<Results extends Record<string, unknown>, E>
  extends Omit<RunResult<Results[keyof Results], E>, "get"> {
  /** The outcome of the agent `id` of the plan. */
  get<Id extends keyof Results & string>(id: Id): Outcome.Outcome<Results[Id], E>
}

/**
 * The shape of a plan: `order` is a topological order (input order among independent agents);
 * `criticalPath` the longest chain of dependencies by duration; `maxParallelism` the most agents
 * running at once with unlimited concurrency when each starts as its dependencies end and runs for
 * its duration (so it depends on the durations: `b` and `c` after `a` beside an independent `d` give
 * 2 with the default 1 ms each, 3 once `d` lasts longer than `a`); `conflicts` the pairs of agents that could run at
 * the same time (neither depends on the other, even indirectly) but whose claims conflict, so the
 * scheduler will serialize them.
 *
 * @since 0.1.0
 * @category models
 */
export type Analysis = analysis.Analysis

/**
 * @since 0.1.0
 * @category models
 */
export interface AnalyzeOptions {
  /** Pool capacities; default: the largest amount any agent claims of each pool. */
  readonly pools?: Readonly<Record<string, number>> | undefined
  /** Measured durations in milliseconds by agent id, used where an agent has no `estimate`. */
  readonly durations?: Readonly<Record<string, number>> | undefined
}

/**
 * Analyzes agents (or a plan) without running them. An agent's duration is its `estimate`, else its
 * recorded duration from `options.durations`, else 1 ms. Invalid agents give the same `InvalidRun`
 * as `Corral.run` (rate-limit names are not checked).
 *
 * @example
 * ```ts
 * import { Plan } from "@corral/core"
 * import { Effect, Result } from "effect"
 *
 * const plan = Plan.make()
 *   .agent("research", { run: Effect.succeed("notes") })
 *   .agent("outline", { dependsOn: ["research"], run: ({ research }) => Effect.succeed(research.length) })
 * const analysis = Plan.analyze(plan.agents, { durations: { research: 60_000 } })
 * if (Result.isSuccess(analysis)) console.log(analysis.success.criticalPath.ids.join(" -> "))
 * ```
 * @since 0.1.0
 * @category analysis
 */
export const analyze = (
  agents: ReadonlyArray<Agent.Any> | Plan<any, any, any>,
  options: AnalyzeOptions = {}
): Result.Result<Analysis, InvalidRun> => {
  const list = isPlan(agents) ? agents.agents : agents
  // Only the agents among an untyped caller's values; `validate` reports the rest.
  const known = Array.isArray(list) ? list.filter(Agent.isAgent) : []
  const nodes = validate(list, {
    concurrency: 1,
    pools: options.pools ?? poolsOf(known),
    claimTimeout: undefined,
    poolScope: "",
    rateLimits: known.flatMap((agent) => (agent.rateLimit === undefined ? [] : [agent.rateLimit]))
  })
  if (Result.isFailure(nodes)) return Result.fail(nodes.failure)
  const durations = nodes.success.map((node) =>
    node.agent.estimate !== undefined ? node.estimateMs : (options.durations?.[node.id] ?? 1)
  )
  return Result.succeed(analysis.analyze(nodes.success, durations))
}

const isPlan = (value: ReadonlyArray<Agent.Any> | Plan<any, any, any>): value is Plan<any, any, any> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && "agents" in value

const poolsOf = (agents: ReadonlyArray<Agent.Any>): Record<string, number> => {
  const pools: Record<string, number> = {}
  for (const agent of agents) {
    const claimed: Claims.Claims["pools"] = Agent.isAgent(agent) ? agent.claims?.pools : undefined
    for (const [pool, amount] of Object.entries(claimed ?? {})) {
      pools[pool] = Math.max(pools[pool] ?? 1, Number.isInteger(amount) && amount > 0 ? amount : 1)
    }
  }
  return pools
}
