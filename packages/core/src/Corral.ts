/**
 * Runs a set of agents with bounded concurrency, resource claims, dependencies, timeouts, retries,
 * budgets and progress events, and returns one outcome per agent.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Agent from "./Agent.ts"
import type { CorralEvent } from "./CorralEvent.ts"
import type { InvalidRun } from "./CorralError.ts"
import * as runner from "./internal/runner.ts"
import type * as Outcome from "./Outcome.ts"
import type * as RateLimiter from "./RateLimiter.ts"
import type { RunResult } from "./RunResult.ts"

/**
 * Options of a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Most agents running at once. Default 8. */
  readonly concurrency?: number | undefined
  /**
   * `"settle"` (default): every agent runs to its own outcome; dependents of a failed agent are
   * `Skipped`. `"fail-fast"`: the first failure interrupts running agents and cancels the rest.
   */
  readonly mode?: "settle" | "fail-fast" | undefined
  /** Capacities of counted pools that agents claim amounts of, e.g. `{ llm: 3 }`. */
  readonly pools?: Readonly<Record<string, number>> | undefined
  /** Default claim timeout for agents that do not set their own. */
  readonly claimTimeout?: Duration.Input | undefined
  /**
   * Stops the run (as `BudgetExceeded`) once reported usage passes a limit. The agent whose report
   * crossed the limit ends `Interrupted` with `crossedBudget: true`. A budget bounds when the run
   * stops, not what is spent: usage already in flight when it stops (calls other agents have made
   * and report afterwards, fibers still finishing) is still counted, so the total can exceed it.
   * A limit that is not a positive number is an `InvalidRun`.
   */
  readonly budget?: { readonly costUsd?: number | undefined; readonly tokens?: number | undefined } | undefined
  /**
   * Receives events in order, on its own fiber: a slow subscriber does not slow the agents and a
   * failing one (or one that returns no effect, such as a plain or `async` callback; a rejection of the promise it returned is ignored) is detached with a warning, without affecting the run. At most `eventBuffer` events wait for the
   * subscriber; while that many wait, new events are dropped and the subscriber later gets one
   * `EventsDropped` event with their count. `RunFinished` is never dropped, and the run returns once
   * the subscriber has handled it. A run interrupted from outside (`Fiber.interrupt`, `Effect.timeout`)
   * stops its agents, then emits `Stopping` (unless already stopping), `Finished` for the agents it
   * interrupted or never started and `RunFinished` with `stopped: { _tag: "Stopped", reason:
   * "interrupted" }` (or the stop already under way), and waits for the subscriber to handle them at
   * most 1 second before interrupting it, so one that never returns delays the interruption by 1 second.
   * Once half of `eventBuffer` events wait, the run lets the subscriber catch up: the worker that finds it
   * so waits until a subscriber that is waiting for events has taken them, a busy one gets a yield
   * (another only if it took events meanwhile), so one that keeps up sees every event, even of agents that
   * never yield.
   */
  readonly onEvent?: ((event: CorralEvent) => Effect.Effect<void, unknown>) | undefined
  /** Most events waiting for `onEvent` before new ones are dropped (see `onEvent`). Default 10000. */
  readonly eventBuffer?: number | undefined
  /** Names the run (holders of claims, events); generated when absent. A blank one is an `InvalidRun` naming `runId`. */
  readonly runId?: string | undefined
  /**
   * Fairness bound, per key: an agent waiting for claims is overtaken on each of its keys by at most
   * this many agents behind it in the queue whose claims conflict with that key (an agent that
   * conflicts on two keys counts on both); once one key reaches it, all its keys are reserved for it.
   * Default `max(32, 4 × concurrency)`; `Infinity` turns the bound off. Another value that is not a
   * whole number of at least 0 is an `InvalidRun`.
   */
  readonly maxBypass?: number | undefined
  /**
   * When this effect completes, the run stops as in fail-fast mode (running agents `Interrupted`,
   * the rest `Cancelled`) and still returns its result; the effect's value is the reason given.
   * No agent starts once it completed; the running agents are interrupted one scheduler turn later,
   * so an agent that completes it as its last step and returns without yielding again ends with its
   * own outcome (it finished its work), while one that yields after completing it is still running
   * and ends `Interrupted`. An effect already complete when the run starts starts no agent. `result.stopped` is set
   * whenever the effect completed before the run returned, however fast the agents finished.
   * Commands use it to turn Ctrl-C into a summarized stop.
   */
  readonly stopOn?: Effect.Effect<string> | undefined
  /**
   * Rate-limit buckets for agents with a `rateLimit`, e.g.
   * `{ openai: { limit: 60, interval: "1 minute", burst: 10 } }`. The run builds its own limiter from
   * them and provides it to its agents as the `RateLimiter` service (so `Llm` calls share the
   * buckets); keys it does not define are served by the `RateLimiter` service from the context, if
   * any. Without this option the run uses that service alone. An agent's `rateLimit` naming a key
   * that neither defines is an `InvalidRun` issue, reported before any agent starts.
   *
   * An agent with a `rateLimit` takes one token before it starts; while it waits it holds no
   * concurrency slot (it is `waiting`, with a `WaitingForRateLimit` event). When the run has a
   * limiter, an agent without a `retry` policy that fails with a retryable rate-limit error
   * (`RateLimited`, or any error with a `retryAfter`) is retried up to 5 attempts in all: the
   * error's key (else the agent's `rateLimit`) is paused for every agent for `retryAfter`. An agent
   * with its own `retry` policy is retried by that policy alone, but such a failure still pauses
   * the key for every agent at once, and the policy's next attempt first waits for the pause (a
   * failure the policy does not retry ends the agent without waiting).
   */
  readonly rateLimits?: RateLimiter.Buckets | undefined
}

/**
 * The result of `Corral.run(agents)`: a `RunResult` holding the unions of the agents' success and
 * failure types, whose `get(id)` gives an agent's outcome at that agent's own types when its id is a
 * literal (`Agent.make("fetch", ...)`), and an id that is not in the list does not compile. With ids
 * only known at run time (`ids.map((id) => Agent.make(id, ...))`) it takes any string and may give
 * `undefined`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResultOf<Agents extends ReadonlyArray<Agent.Any>>
  extends Omit<RunResult<Agent.Success<Agents[number]>, Agent.Failure<Agents[number]>>, "get"> {
  /** The outcome of one agent. */
  get<const Id extends Agents[number]["id"]>(
    id: Id
  ): string extends Agents[number]["id"]
    ? Outcome.Outcome<Agent.Success<Agents[number]>, Agent.Failure<Agents[number]>> | undefined
    : Outcome.Outcome<
        Agent.Success<Extract<Agents[number], { readonly id: Id }>>,
        Agent.Failure<Extract<Agents[number], { readonly id: Id }>>
      >
}

/**
 * Runs agents and returns a `RunResult` with one outcome per agent, in input order. Invalid agents
 * or options fail with `InvalidRun` before anything starts. Interrupting the returned effect
 * interrupts every agent and runs every finalizer before it completes.
 *
 * The agents may succeed and fail with different types: the result holds their unions. With
 * `rateLimits`, the run provides its own `RateLimiter` to the agents, so agents that use
 * `RateLimiter.withToken` need no other limiter.
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const result = yield* Corral.run([
 *     Agent.make("fetch", { run: Effect.succeed(42), timeout: "10 seconds" }),
 *     Agent.make("edit-a", { run: Effect.void, claims: { write: ["src/a.ts"] } }),
 *     Agent.make("edit-a-again", { run: Effect.void, claims: { write: ["src/a.ts"] } })
 *   ], { concurrency: 2 })
 *   return result.allSucceeded
 * })
 * ```
 * @since 0.1.0
 * @category running
 */
export const run: {
  <const Agents extends ReadonlyArray<Agent.Any>>(
    agents: Agents,
    options: Options & { readonly rateLimits: RateLimiter.Buckets }
  ): Effect.Effect<ResultOf<Agents>, InvalidRun, Exclude<Agent.Services<Agents[number]>, RateLimiter.RateLimiter>>
  <const Agents extends ReadonlyArray<Agent.Any>>(
    agents: Agents,
    options?: Options
  ): Effect.Effect<ResultOf<Agents>, InvalidRun, Agent.Services<Agents[number]>>
} = runner.run as any

/**
 * Gives the running agent's concurrency slot back while the agent keeps running: the run starts
 * the next ready agent at once, so `concurrency` then bounds the agents that still hold a slot, not
 * every running agent. Use it for a tail of work that should not keep other agents waiting but must
 * still finish under the agent's claims (committing and merging its work, uploading its results):
 * the agent keeps its claims, its lease and its fencing token until it ends, and it ends as before
 * (its outcome, `Finished` event and dependents come when its effect completes).
 *
 * Succeeds with `true` when it released a slot, and with `false`, doing nothing, when there is none
 * to release: outside a run, in a fiber the agent forked once the agent has ended, or when the
 * agent already released it. It releases the slot of the innermost agent: inside a run nested in an
 * agent, the nested agent's slot in the nested run.
 *
 * - `timeout`: still measured over the whole agent, the time after the release included.
 * - retries: the release holds for the attempt that made it; another attempt (a `retry` policy, or
 *   a retried rate-limit error) first takes a slot again, waiting as a new agent would (ahead of
 *   agents not started yet), so attempts always run within the bound until they release again.
 * - events and progress: the agent stays `running` (`progress.running` counts it, so it can exceed
 *   `concurrency` while released agents finish); no event marks the release.
 * - cancellation: interrupting the run, fail-fast and timeouts interrupt a released agent as any
 *   other, and its claims are released when it ends.
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const edit = (id: string) =>
 *   Agent.make(id, {
 *     claims: { write: [`src/${id}.ts`] },
 *     run: Effect.gen(function*() {
 *       yield* Effect.sleep("1 second") // the work, within the slot
 *       yield* Corral.releaseSlot // the next agent starts now
 *       yield* Effect.sleep("100 millis") // committing it, still under the claims
 *     })
 *   })
 *
 * const program = Corral.run([edit("a"), edit("b"), edit("c")], { concurrency: 1 })
 * ```
 * @since 0.1.0
 * @category running
 */
export const releaseSlot: Effect.Effect<boolean> = Effect.map(
  Agent.CurrentRef,
  (frame) => frame?.releaseSlot?.() ?? false
)
