/**
 * Executing one agent: its context, its attempts (retry policy, rate-limited retries, timeout,
 * span) and the classification of its exit into an `Outcome`.
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as AgentModule from "../Agent.ts"
import * as Outcome from "../Outcome.ts"
import * as RateLimiter from "../RateLimiter.ts"
import * as Usage from "../Usage.ts"
import type { EventSink } from "./events.ts"
import { addEntry } from "./frameContext.ts"
import type { Node } from "./node.ts"
import type { Stopping } from "./stopping.ts"

export const maxRateLimitedAttempts = 5

export interface ExecHost {
  readonly runId: string
  readonly clock: Clock.Clock
  readonly limiter: RateLimiter.Service | undefined
  readonly tracing: boolean
  readonly events: EventSink | undefined
  readonly stopping: Stopping<Node>
  /** Takes the slot back for another attempt of an agent that released it (`Corral.releaseSlot`). */
  readonly retake: (node: Node) => Effect.Effect<void>
}

class AgentTimeout {
  readonly afterMs: number
  constructor(afterMs: number) {
    this.afterMs = afterMs
  }
}

const currentKey = AgentModule.CurrentRef.key

/**
 * The agent's own context: the node as its `Agent.Frame`. Fibers the agent forks inherit it, so
 * they read and report as this agent for as long as they live. `addEntry` is `Context.addUnsafe`
 * by the reference's key (`Context.add` without its `dual` dispatch) with an entry V8 never
 * allocates in the old generation (`frameContext.ts`).
 */
export const bind = (context: Context.Context<never>, node: Node): Context.Context<never> =>
  addEntry<never, Node>(context, currentKey, node) as Context.Context<never>

/** Every attempt of the agent, within its timeout and (when tracing) its span. */
export const attempts = (
  host: ExecHost,
  node: Node,
  deps: Record<string, unknown>
): Effect.Effect<unknown, unknown> => {
  let effect: Effect.Effect<unknown, unknown>
  if (node.agent.retry === undefined) {
    node.attempts = 1
    effect = AgentModule.effectOf(node.agent, deps) as Effect.Effect<unknown, unknown>
    if (host.limiter !== undefined) effect = retryRateLimited(host, node, effect, host.limiter)
  } else {
    const limiter = host.limiter
    const pause: RateLimitPause = { wait: undefined }
    effect = Effect.suspend(() => {
      let run = AgentModule.effectOf(node.agent, deps) as Effect.Effect<unknown, unknown>
      if (limiter !== undefined) run = pausing(node, run, limiter, pause)
      const wait = pause.wait
      pause.wait = undefined
      if (wait === undefined && !node.slotReleased) {
        begin(host, node)
        return run
      }
      run = begun(host, node, run)
      if (node.slotReleased) run = Effect.andThen(host.retake(node), run)
      return wait === undefined ? run : Effect.andThen(wait, run)
    })
    effect = Effect.retry(effect, node.agent.retry) as Effect.Effect<unknown, unknown>
  }
  if (node.timeoutMs !== undefined) {
    const afterMs = node.timeoutMs
    effect = Effect.timeoutOrElse(effect, { duration: afterMs, orElse: () => Effect.fail(new AgentTimeout(afterMs)) })
  }
  if (!host.tracing) return effect
  return effect.pipe(
    Effect.onExit((exit) =>
      Effect.annotateCurrentSpan({
        "corral.agent.outcome": classify(host, node, exit)._tag,
        "corral.agent.attempts": node.attempts
      })
    ),
    Effect.withSpan("corral.agent", { attributes: { "corral.agent.id": node.id, "corral.run.id": host.runId } })
  )
}

/**
 * Counts the attempt that starts now, and tells a retry's `Retrying`. An attempt is counted when it
 * runs, after the rate-limit pause and the slot it waited for: one interrupted while waiting (a
 * budget crossed by another agent, fail-fast, a stop) never ran and is not counted.
 */
const begin = (host: ExecHost, node: Node): void => {
  const events = host.events
  if (++node.attempts > 1 && events !== undefined) {
    events.emit({ _tag: "Retrying", ...events.base(), agentId: node.id, attempt: node.attempts })
  }
}

/** `run`, counted by `begin` when it starts. */
const begun = (host: ExecHost, node: Node, run: Effect.Effect<unknown, unknown>): Effect.Effect<unknown, unknown> =>
  Effect.suspend(() => {
    begin(host, node)
    return run
  })

/** The wait a retry of an agent with its own `retry` policy owes a rate-limit pause, if any. */
interface RateLimitPause {
  wait: Effect.Effect<void> | undefined
}

/**
 * One attempt of an agent with its own `retry` policy: a rate-limited failure pauses its key for
 * every agent at once and leaves the wait for the pause to the next attempt, so a retry waits for
 * `retryAfter` and a failure the policy does not retry ends the agent without waiting.
 */
const pausing = (
  node: Node,
  run: Effect.Effect<unknown, unknown>,
  limiter: RateLimiter.Service,
  pause: RateLimitPause
): Effect.Effect<unknown, unknown> =>
  Effect.catch(run, (error) => {
    const retryAfter = RateLimiter.retryAfterOf(error)
    if (retryAfter === undefined) return Effect.fail(error)
    const key = keyOfError(error, limiter) ?? node.agent.rateLimit
    if (key === undefined) {
      pause.wait = Effect.sleep(retryAfter)
      return Effect.fail(error)
    }
    pause.wait = limiter.take(key, 1)
    return Effect.andThen(limiter.pause(key, retryAfter), Effect.fail(error))
  })

const retryRateLimited = (
  host: ExecHost,
  node: Node,
  effect: Effect.Effect<unknown, unknown>,
  limiter: RateLimiter.Service
): Effect.Effect<unknown, unknown> => {
  const attempt: Effect.Effect<unknown, unknown> = Effect.catch(effect, (error) => {
    const retryAfter = RateLimiter.retryAfterOf(error)
    if (retryAfter === undefined || node.attempts >= maxRateLimitedAttempts) return Effect.fail(error)
    const key = keyOfError(error, limiter) ?? node.agent.rateLimit
    const wait =
      key === undefined
        ? Effect.sleep(retryAfter)
        : Effect.andThen(limiter.pause(key, retryAfter), limiter.take(key, 1))
    const again = begun(host, node, attempt)
    return Effect.andThen(wait, node.slotReleased ? Effect.andThen(host.retake(node), again) : again)
  })
  return attempt
}

/** Fields of the node's outcome, ended now. */
export const common = (clock: Clock.Clock, node: Node, endedAt = clock.currentTimeMillisUnsafe()): Outcome.Common => {
  return {
    agentId: node.id,
    attempts: node.attempts,
    queuedAt: node.queuedAt,
    startedAt: node.startedAt ?? null,
    endedAt,
    waitedMs: (node.startedAt ?? endedAt) - node.queuedAt,
    usage: node.usage
  }
}

/**
 * `new Outcome.Succeeded(...)` for an agent that ran, built directly: the same prototype and the
 * same own fields in the same order (`_tag` last, as the class's field initializer puts it), without
 * the intermediate fields object, the constructor chain and `Object.assign`, which were a visible
 * share of the per-agent cost at 100k+ agents. A plain constructor function rather than
 * `Object.create`: V8 then keeps every field inside the object (no separate property array).
 */
function SucceededOutcome(
  this: Record<string, unknown>,
  agentId: string,
  attempts: number,
  queuedAt: number | null,
  startedAt: number | null,
  endedAt: number | null,
  waitedMs: number | null,
  usage: Usage.Usage,
  value: unknown
) {
  this.agentId = agentId
  this.attempts = attempts
  this.queuedAt = queuedAt
  this.startedAt = startedAt
  this.endedAt = endedAt
  this.waitedMs = waitedMs
  this.usage = usage
  this.value = value
  this.cached = false
  this._tag = "Succeeded"
}
SucceededOutcome.prototype = Outcome.Succeeded.prototype

type SucceededOutcome = new (
  ...args: Parameters<typeof SucceededOutcome> extends [...infer P] ? P : never
) => Outcome.Succeeded

/**
 * Built once when the module loads, with `null` times, and kept alive (V8 forgets the shape of
 * objects once none is left), so that V8 keeps those fields as pointers: a field that has only ever
 * held numbers stores each number in a box of its own (16 bytes, copied on every store). As
 * pointers, an outcome's times share the boxes of the run's start and of the run's clock readings
 * (`Runner.now`), and `waitedMs`, kept a small integer, needs none.
 */
export const succeededShape: unknown = new (SucceededOutcome as unknown as SucceededOutcome)(
  "",
  0,
  null,
  null,
  null,
  null,
  Usage.zero,
  undefined
)

/** `ms` as a small integer when it is one, which V8 stores without a box. */
const small = (ms: number): number => (ms >= 0 && ms <= 0x3fffffff && ms === Math.floor(ms) ? ms | 0 : ms)

/** The outcome of an agent that succeeded with `value`, ended at `endedAt`. */
export const succeeded = (endedAt: number, node: Node, value: unknown): Outcome.Succeeded => {
  const startedAt = node.startedAt!
  const queuedAt = node.queuedAt
  return new (SucceededOutcome as unknown as SucceededOutcome)(
    node.id,
    node.attempts,
    queuedAt,
    startedAt,
    endedAt,
    small(startedAt - queuedAt),
    node.usage,
    value
  )
}

/** The outcome of an agent that succeeded with `value` in one attempt, without usage (see `Compact`). */
export const succeededAt = (
  agentId: string,
  queuedAt: number,
  startedAt: number,
  endedAt: number,
  value: unknown
): Outcome.Succeeded =>
  new (SucceededOutcome as unknown as SucceededOutcome)(
    agentId,
    1,
    queuedAt,
    startedAt,
    endedAt,
    small(startedAt - queuedAt),
    Usage.zero,
    value
  )

/** The outcome of an agent that ran and exited with `exit` at `endedAt` (default: now). */
export const classify = (
  host: ExecHost,
  node: Node,
  exit: Exit.Exit<unknown, unknown>,
  endedAt = host.clock.currentTimeMillisUnsafe()
): Outcome.Outcome => {
  if (Exit.isSuccess(exit)) return succeeded(endedAt, node, exit.value)
  const fields = common(host.clock, node, endedAt)
  const cause = exit.cause
  if (Cause.hasInterruptsOnly(cause)) {
    const stopping = host.stopping
    const crossedBudget = stopping.crossing === node
    const reason = crossedBudget ? stopping.crossedText() : stopping.text()
    return new Outcome.Interrupted({ ...fields, reason, crossedBudget })
  }
  const error = Cause.findErrorOption(cause)
  if (error._tag === "Some") {
    if (error.value instanceof AgentTimeout) return new Outcome.TimedOut({ ...fields, afterMs: error.value.afterMs })
    return new Outcome.Failed({ ...fields, error: error.value, defect: false, message: messageOf(error.value) })
  }
  const defect = Cause.squash(cause)
  return new Outcome.Failed({ ...fields, error: defect, defect: true, message: messageOf(defect) }) as Outcome.Outcome
}

const keyOfError = (error: unknown, limiter: RateLimiter.Service): string | undefined => {
  const key = typeof error === "object" && error !== null && "key" in error ? error.key : undefined
  return typeof key === "string" && limiter.keys.includes(key) ? key : undefined
}

const messageOf = (error: unknown): string => {
  if (error instanceof Error) return error.message
  if (typeof error === "object" && error !== null) {
    const message = (error as { message?: unknown }).message
    if (typeof message === "string" && message.length > 0) return message
    const tag = (error as { _tag?: unknown })._tag
    if (typeof tag === "string") return tag
  }
  try {
    return typeof error === "string" ? error : JSON.stringify(error)
  } catch {
    return String(error)
  }
}
