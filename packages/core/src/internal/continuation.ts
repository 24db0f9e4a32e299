/**
 * A worker's agent frame (`Stint` in `runner.ts`): `isExitFast`, which tells an agent's effect that
 * is already an `Exit` (run without a frame) by one read of the `Exit` type id, as effect's own run
 * loop does (`effectIsExit`): `Exit.isExit` tests it with `in`, and `Object.getPrototypeOf` of an
 * effect of any shape calls into V8's runtime; and `agentFrame`, one `Effect.matchCauseEffect` frame
 * per worker that runs each of its agents in turn (`under`). Its handlers are functions of this
 * module that read the frame's owner, as effect's own `ContImpl` reads its payload: no frame is
 * made per agent, no closure per worker, and the handlers' optimised code outlives every run. `test/internal/continuation.test.ts` pins both against effect.
 */
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"

const exitTypeId = "~effect/Exit"

/** Whether `effect` is an `Exit`: the `Exit` type id every `Exit` carries and no other effect has. */
export const isExitFast = (effect: Effect.Effect<unknown, unknown>): effect is Exit.Exit<unknown, unknown> =>
  (effect as Partial<Exit.Exit<unknown, unknown>>)[exitTypeId] !== undefined

/** The handlers of an agent's continuation (`Effect.matchCauseEffect`). */
export interface Handlers {
  readonly onSuccess: (value: unknown) => Effect.Effect<unknown>
  readonly onFailure: (cause: Cause.Cause<unknown>) => Effect.Effect<unknown>
}

const argsKey = "~effect/Effect/args"
const successKey = "~effect/Effect/successCont"
const failureKey = "~effect/Effect/failureCont"

/**
 * Whether `frame`, what `Effect.matchCauseEffect(effect, handlers)` made, holds exactly the own
 * fields `Frame` sets before its owner, in its order: core accepts any effect `^4.1.0`, and under a
 * version that lays the frame out otherwise `under` makes a frame per agent with
 * `Effect.matchCauseEffect` itself.
 */
export const laidOutAsContinuation = (frame: object, effect: unknown, handlers: Handlers): boolean => {
  const names = Object.getOwnPropertyNames(frame)
  const own = frame as Record<string, unknown>
  return (
    names.length === 3 &&
    names[0] === argsKey &&
    names[1] === successKey &&
    names[2] === failureKey &&
    Object.getOwnPropertySymbols(frame).length === 0 &&
    own[argsKey] === effect &&
    own[successKey] === handlers.onSuccess &&
    own[failureKey] === handlers.onFailure
  )
}

/** What a worker's frame ends its agents with: the effect each returns runs next on the worker. */
export interface Owner {
  readonly succeeded: (value: unknown) => Effect.Effect<unknown>
  readonly failed: (cause: Cause.Cause<unknown>) => Effect.Effect<unknown>
}

/** A worker's frame: `under` runs one agent's effect under it at a time. */
export interface AgentFrame {
  readonly owner: Owner
}

function frameSucceeded(this: AgentFrame, value: unknown): Effect.Effect<unknown> {
  return this.owner.succeeded(value)
}

function frameFailed(this: AgentFrame, cause: Cause.Cause<unknown>): Effect.Effect<unknown> {
  return this.owner.failed(cause)
}

/**
 * The frame `Effect.matchCauseEffect(effect, { onSuccess: frameSucceeded, onFailure: frameFailed })`
 * makes, with `owner` after effect's own fields (effect's run loop calls a handler as the frame's
 * method). Its effect is set by `under`, for each agent.
 */
function Frame(this: Record<string, unknown>, owner: Owner) {
  this[argsKey] = undefined
  this[successKey] = frameSucceeded
  this[failureKey] = frameFailed
  this.owner = owner
}

const probeHandlers: Handlers = { onSuccess: frameSucceeded, onFailure: frameFailed }
const probeFrame = Effect.matchCauseEffect(Effect.void, probeHandlers)
Frame.prototype = Object.getPrototypeOf(probeFrame)

/** Whether this effect's frame is laid out as `Frame` builds one (pinned by the tests). */
export const direct: boolean = laidOutAsContinuation(probeFrame, Effect.void, probeHandlers)

const evaluateKey = "~effect/Effect/evaluate"

interface Stacked {
  readonly _stack: Array<unknown>
}

/**
 * Whether the frame's evaluation is to push itself on the fiber's stack (`FiberImpl._stack`) and
 * answer its effect, as effect's `evaluateCont` does: then `enter` does it without the run loop's
 * step on the frame (a megamorphic `current[evaluate]` load and a call, per agent).
 */
export const entering: boolean = (() => {
  if (!direct) return false
  const fiber: Stacked = { _stack: [] }
  const frame = Effect.matchCauseEffect(Effect.void, probeHandlers) as unknown as Record<string, unknown>
  const evaluate = frame[evaluateKey]
  if (typeof evaluate !== "function") return false
  const answer = evaluate.call(frame, fiber)
  const running = Effect.runFork(Effect.void) as unknown as Partial<Stacked>
  return (
    answer === Effect.void && fiber._stack.length === 1 && fiber._stack[0] === frame && Array.isArray(running._stack)
  )
})()

/** Under an effect whose frame is laid out otherwise: the handlers, for a frame per agent. */
class HandlersFrame implements AgentFrame, Handlers {
  readonly owner: Owner
  constructor(owner: Owner) {
    this.owner = owner
  }
  readonly onSuccess = (value: unknown) => this.owner.succeeded(value)
  readonly onFailure = (cause: Cause.Cause<unknown>) => this.owner.failed(cause)
}

/** A frame for `owner`'s agents, one at a time. */
export const agentFrame = (owner: Owner): AgentFrame =>
  direct ? new (Frame as unknown as new (owner: Owner) => AgentFrame)(owner) : new HandlersFrame(owner)

/**
 * `under(frame, effect)` for a handler of the frame to answer (effect's run loop took the frame off
 * `fiber`'s stack before calling it, and evaluates the answer next): the frame's own evaluation,
 * done here, so the frame on the stack takes `effect`'s failure as it would under `under`.
 */
export const enter = (
  frame: AgentFrame,
  fiber: unknown,
  effect: Effect.Effect<unknown, unknown>
): Effect.Effect<unknown> => {
  if (!entering) return under(frame, effect)
  ;(frame as unknown as Record<string, unknown>)[argsKey] = effect
  ;(fiber as Stacked)._stack.push(frame)
  return effect as Effect.Effect<unknown>
}

/**
 * Runs `effect`, then the owner's handler of its exit. The frame is effect's until that handler
 * runs (effect's run loop takes it off the fiber's stack before calling it): one agent at a time.
 */
export const under = (frame: AgentFrame, effect: Effect.Effect<unknown, unknown>): Effect.Effect<unknown> => {
  if (!direct) return Effect.matchCauseEffect(effect, frame as HandlersFrame)
  ;(frame as unknown as Record<string, unknown>)[argsKey] = effect
  return frame as unknown as Effect.Effect<unknown>
}
