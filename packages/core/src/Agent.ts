/**
 * An agent is a unit of work with an id: an `Effect` plus how to run it (timeout, retries, claims,
 * dependencies). Agents are plain values; `Corral.run` runs them.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { Class as PipeableClass, type Pipeable } from "effect/Pipeable"
import type * as Schedule from "effect/Schedule"
import type * as Claims from "./Claims.ts"
import { NotAnEffect } from "./CorralError.ts"
import { describe } from "./internal/describe.ts"
import type * as Usage from "./Usage.ts"

/**
 * @since 0.1.0
 * @category symbols
 */
export const TypeId = "~@corral/core/Agent" as const

/**
 * The results of an agent's dependencies, by agent id.
 *
 * @since 0.1.0
 * @category models
 */
export type Deps = Readonly<Record<string, unknown>>

/**
 * An agent that succeeds with `A`, fails with `E` and needs the services `R`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent<out A, out E = never, out R = never, out Id extends string = string> extends Pipeable {
  readonly [TypeId]: typeof TypeId
  readonly id: Id
  readonly run: (deps: Deps) => Effect.Effect<A, E, R>
  readonly timeout: Duration.Input | undefined
  readonly retry: Schedule.Schedule<unknown, any, never, any> | undefined
  readonly claims: Claims.Claims | undefined
  readonly claimTimeout: Duration.Input | undefined
  readonly dependsOn: ReadonlyArray<string>
  readonly estimate: Duration.Input | undefined
  readonly rateLimit: string | undefined
  readonly idempotencyKey: string | undefined
  readonly idempotencyKeyOf: ((deps: Deps) => string) | undefined
  readonly inputs: ReadonlyArray<string> | undefined
  readonly labels: Readonly<Record<string, string>>
}

/**
 * Any agent.
 *
 * @since 0.1.0
 * @category models
 */
export type Any = Agent<any, any, any>

/**
 * @since 0.1.0
 * @category type-level
 */
export type Success<T> = T extends Agent<infer A, infer _E, infer _R> ? A : never

/**
 * @since 0.1.0
 * @category type-level
 */
export type Failure<T> = T extends Agent<infer _A, infer E, infer _R> ? E : never

/**
 * @since 0.1.0
 * @category type-level
 */
export type Services<T> = T extends Agent<infer _A, infer _E, infer R> ? R : never

/**
 * How to run an agent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<A, E, R, D extends Deps = Deps> {
  /** The work: an effect, or a function of the dependencies' results. */
  readonly run: Effect.Effect<A, E, R> | ((deps: D) => Effect.Effect<A, E, R>)
  /** Total time the agent may take, retries included. Exceeding it gives a `TimedOut` outcome. */
  readonly timeout?: Duration.Input | undefined
  /** A retry policy for typed failures; defects are never retried. */
  readonly retry?: Schedule.Schedule<unknown, NoInfer<E>, never, any> | undefined
  /** Keys read or written and pool amounts held while the agent runs. */
  readonly claims?: Claims.Claims | undefined
  /** How long the agent may wait for its claims before it ends with `ClaimTimedOut`. */
  readonly claimTimeout?: Duration.Input | undefined
  /** Agents that must succeed before this one starts; their values are passed to `run`. */
  readonly dependsOn?: ReadonlyArray<string> | undefined
  /** Expected duration, used to start agents on the critical path first. */
  readonly estimate?: Duration.Input | undefined
  /** A rate-limit bucket whose token the agent takes before it starts. */
  readonly rateLimit?: string | undefined
  /**
   * Identifies the agent's work for cached reruns with a `Ledger`. Default: a hash of the id, the
   * `inputs` and the dependencies' results.
   */
  readonly idempotencyKey?: string | undefined
  /** Computes the idempotency key from the dependencies' results (instead of `idempotencyKey`). */
  readonly idempotencyKeyOf?: ((deps: D) => string) | undefined
  /** What else the agent's work depends on (file digests, model names, prompts), for the default key. */
  readonly inputs?: ReadonlyArray<string> | undefined
  /** Free-form labels, kept as `agent.labels`; the scheduler ignores them (`AgentKind.agent` stores its kind and `requires` here). */
  readonly labels?: Readonly<Record<string, string>> | undefined
}

/**
 * Defines an agent. Nothing runs until the agent is passed to `Corral.run`, which validates it.
 *
 * @example
 * ```ts
 * import { Agent } from "@corral/core"
 * import { Effect, Schedule } from "effect"
 *
 * const summarize = Agent.make("summarize", {
 *   run: Effect.succeed("summary"),
 *   timeout: "30 seconds",
 *   retry: Schedule.exponential("100 millis").pipe(Schedule.upTo({ times: 3 })),
 *   claims: { write: ["docs/summary.md"] }
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = <A, E = never, R = never, D extends Deps = Deps, const Id extends string = string>(
  id: Id,
  options: Options<A, E, R, D>
): Agent<A, E, R, Id> => new AgentImpl(id, options as Options<A, E, R>)

const noDependencies: ReadonlyArray<string> = Object.freeze([])
const noLabels: Readonly<Record<string, string>> = Object.freeze({})

type Extra = Omit<Options<unknown, unknown, unknown>, "run">

/** The options other than `run`, copied; `undefined` when none is set (most agents). */
const extraOf = (options: Options<unknown, unknown, unknown>): Extra | undefined =>
  options.timeout === undefined &&
  options.retry === undefined &&
  options.claims === undefined &&
  options.claimTimeout === undefined &&
  options.dependsOn === undefined &&
  options.estimate === undefined &&
  options.rateLimit === undefined &&
  options.idempotencyKey === undefined &&
  options.idempotencyKeyOf === undefined &&
  options.inputs === undefined &&
  options.labels === undefined
    ? undefined
    : {
        timeout: options.timeout,
        retry: options.retry,
        claims: options.claims,
        claimTimeout: options.claimTimeout,
        dependsOn: options.dependsOn,
        estimate: options.estimate,
        rateLimit: options.rateLimit,
        idempotencyKey: options.idempotencyKey,
        idempotencyKeyOf: options.idempotencyKeyOf,
        inputs: options.inputs,
        labels: options.labels
      }

/**
 * An agent keeps its id, its `run` as given and the other options only when one is set, and reads
 * the fields through getters: a run keeps every agent alive until it returns, so at 100k+ agents
 * the agent's size (and a closure per agent for `run`) was a visible share of the collector's work.
 */
class AgentImpl<A, E, R, Id extends string> extends PipeableClass implements Agent<A, E, R, Id> {
  declare readonly [TypeId]: typeof TypeId
  readonly id: Id
  private readonly given: Effect.Effect<A, E, R> | ((deps: Deps) => Effect.Effect<A, E, R>)
  private readonly extra: Extra | undefined

  constructor(id: Id, options: Options<A, E, R>) {
    super()
    this.id = id
    this.given = options.run
    this.extra = extraOf(options as Options<unknown, unknown, unknown>)
  }

  get run(): (deps: Deps) => Effect.Effect<A, E, R> {
    const given = this.given
    return Effect.isEffect(given) ? () => given : (deps) => this.effect(deps)
  }
  /** Whether `run` is a function of the dependencies' values (else it is an effect that ignores them). */
  readsDeps(): boolean {
    return !Effect.isEffect(this.given)
  }
  /**
   * `run(deps)` without the function `run` makes: a run calls it once per attempt. An object is
   * tested here, `Effect.isEffect`'s test written out: this site sees only the kinds of effect the
   * agents are given, where `isEffect`'s own, shared by every caller in the program, is megamorphic
   * (≈ 250 instructions per attempt).
   */
  effect(deps: Deps): Effect.Effect<A, E, R> {
    const given = this.given
    if (typeof given === "object" && given !== null && Effect.TypeId in given) return given as Effect.Effect<A, E, R>
    if (Effect.isEffect(given)) return given as Effect.Effect<A, E, R>
    if (typeof given === "function") return Effect.suspend(() => checked(this.id, given(deps)))
    return Effect.die(new NotAnEffect({ agentId: this.id, got: describe(given), returned: false }))
  }
  /**
   * What `run` is when it is a plain value or a `Promise` (`Corral.run` rejects it up front), else
   * `undefined`. Only kinds a `typeof` or a prototype test tells apart: `Effect.isEffect` on every
   * agent of a large run cost ≈ 4% of its CPU per agent, and another object that is not an effect
   * fails the agent with `NotAnEffect` when it starts.
   */
  runProblem(): string | undefined {
    const given: unknown = this.given
    return typeof given === "function" || (typeof given === "object" && given !== null && !(given instanceof Promise))
      ? undefined
      : describe(given)
  }
  get timeout(): Duration.Input | undefined {
    return this.extra?.timeout
  }
  get retry(): Schedule.Schedule<unknown, any, never, any> | undefined {
    return this.extra?.retry
  }
  get claims(): Claims.Claims | undefined {
    return this.extra?.claims
  }
  get claimTimeout(): Duration.Input | undefined {
    return this.extra?.claimTimeout
  }
  get dependsOn(): ReadonlyArray<string> {
    return this.extra?.dependsOn ?? noDependencies
  }
  get estimate(): Duration.Input | undefined {
    return this.extra?.estimate
  }
  get rateLimit(): string | undefined {
    return this.extra?.rateLimit
  }
  get idempotencyKey(): string | undefined {
    return this.extra?.idempotencyKey
  }
  get idempotencyKeyOf(): ((deps: Deps) => string) | undefined {
    return this.extra?.idempotencyKeyOf as ((deps: Deps) => string) | undefined
  }
  get inputs(): ReadonlyArray<string> | undefined {
    return this.extra?.inputs
  }
  get labels(): Readonly<Record<string, string>> {
    return this.extra?.labels ?? noLabels
  }
}

Object.defineProperty(AgentImpl.prototype, TypeId, { value: TypeId })

/** What a `run` function returned, when it is an effect; else a defect naming the agent (never a crash of the run). */
const checked = <A, E, R>(agentId: string, returned: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.isEffect(returned)
    ? returned
    : Effect.die(new NotAnEffect({ agentId, got: describe(returned), returned: true }))

/**
 * What `agent.run` is when it is neither an effect nor a function (a `Promise`, a plain value), else
 * `undefined`.
 *
 * @internal
 */
export const runProblem = (agent: Any): string | undefined =>
  agent instanceof AgentImpl ? agent.runProblem() : undefined

/**
 * The effect of one attempt of `agent` (`agent.run(deps)`).
 *
 * @internal
 */
export const effectOf = <A, E, R>(agent: Agent<A, E, R>, deps: Deps): Effect.Effect<A, E, R> =>
  agent instanceof AgentImpl ? agent.effect(deps) : agent.run(deps)

/**
 * Whether an attempt of `agent` reads the values of its dependencies: a run builds that record only
 * for agents whose `run` is a function of it.
 *
 * @internal
 */
export const readsDeps = (agent: Any): boolean => !(agent instanceof AgentImpl) || agent.readsDeps()

/**
 * `true` for values built with `Agent.make`. (A class test first: a run checks every agent twice,
 * and the property test alone is a megamorphic lookup per call.)
 *
 * @since 0.1.0
 * @category guards
 */
export const isAgent = (u: unknown): u is Any =>
  u instanceof AgentImpl || (typeof u === "object" && u !== null && TypeId in u)

/**
 * What a running agent knows about itself: its run, id, attempt and the fencing token of its
 * claims (when it has claims), to pass on to systems that must reject stale writers.
 *
 * @since 0.1.0
 * @category models
 */
export interface Current {
  readonly runId: string
  readonly agentId: string
  readonly attempt: number
  readonly fencingToken: number | undefined
}

/**
 * What a run binds to each agent for the agent's whole lifetime: where `Agent.current` and
 * `Usage.report` read from. The run provides it once when the agent starts, so fibers the agent
 * forks out of its lifetime (`Effect.forkDetach`, `forkIn` an outer scope) keep reading and
 * reporting as that agent even after it ended. Its child fibers (`Effect.forkChild`) are
 * interrupted when it ends, before its claims are released.
 *
 * `report` returns `false` when the usage could not be attributed (the run had ended).
 *
 * @since 0.1.0
 * @category models
 */
export interface Frame {
  readonly current: () => Current
  readonly report: (usage: Partial<Usage.Usage>) => boolean
  /**
   * Gives the agent's concurrency slot back while it keeps running (see `Corral.releaseSlot`);
   * `false` when there was no slot to give back. Frames of other runtimes may leave it out.
   */
  readonly releaseSlot?: (() => boolean) | undefined
}

/**
 * Set by the run for each of its agents.
 *
 * @since 0.1.0
 * @category references
 */
export const CurrentRef = Context.Reference<Frame | undefined>("@corral/core/Agent/Current", {
  defaultValue: () => undefined
})

/**
 * The running agent, or `undefined` outside a run. Inside a fiber the agent forked it is still that
 * agent, even after the agent ended.
 *
 * @example
 * ```ts
 * import { Agent } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const write = Effect.gen(function*() {
 *   const me = yield* Agent.current
 *   return `written by ${me?.agentId} with token ${me?.fencingToken}`
 * })
 * ```
 * @since 0.1.0
 * @category accessors
 */
export const current: Effect.Effect<Current | undefined> = Effect.map(CurrentRef, (frame) => frame?.current())
