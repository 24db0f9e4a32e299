/**
 * A worker's agent continuation (`Stint` in `runner.ts`): its handlers; `isExitFast`, which
 * tells an agent's effect that is already an `Exit` (run without a continuation) by one read of the
 * `Exit` type id, as effect's own run loop does (`effectIsExit`): `Exit.isExit` tests it with `in`,
 * and `Object.getPrototypeOf` of an effect of any shape calls into V8's runtime; and `continuation`,
 * the frame `Effect.matchCauseEffect` makes, built without reading each handler's `length` (an
 * accessor V8 answers through a call into its runtime, twice per agent) or `dual`'s argument count.
 * `test/internal/continuation.test.ts` pins both against effect.
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
 * `Effect.matchCauseEffect(effect, handlers)` for handlers of one parameter each (which effect keeps
 * as they are): the same prototype and the same own fields in the same order, set directly.
 */
function Continuation(
  this: Record<string, unknown>,
  effect: Effect.Effect<unknown, unknown>,
  onSuccess: Handlers["onSuccess"],
  onFailure: Handlers["onFailure"]
) {
  this[argsKey] = effect
  this[successKey] = onSuccess
  this[failureKey] = onFailure
}

type Continuation = new (
  effect: Effect.Effect<unknown, unknown>,
  onSuccess: Handlers["onSuccess"],
  onFailure: Handlers["onFailure"]
) => Effect.Effect<unknown>

/**
 * Whether `frame`, what `Effect.matchCauseEffect(effect, handlers)` made, holds exactly the own
 * fields `Continuation` sets, in its order: core accepts any effect `^4.1.0`, and under a version
 * that lays the frame out otherwise `continuation` is `Effect.matchCauseEffect` itself.
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

const probeHandlers: Handlers = {
  onSuccess: (value) => Effect.succeed(value),
  onFailure: (cause) => Effect.exit(Effect.failCause(cause))
}
const probeFrame = Effect.matchCauseEffect(Effect.void, probeHandlers)
Continuation.prototype = Object.getPrototypeOf(probeFrame)

/** Whether this effect's frame is laid out as `Continuation` builds one (pinned by the tests). */
export const direct: boolean = laidOutAsContinuation(probeFrame, Effect.void, probeHandlers)

/** Runs `effect`, then the handler of its exit; `handlers` take one parameter each. */
export const continuation: (effect: Effect.Effect<unknown, unknown>, handlers: Handlers) => Effect.Effect<unknown> =
  direct
    ? (effect, handlers) =>
        new (Continuation as unknown as Continuation)(effect, handlers.onSuccess, handlers.onFailure)
    : (effect, handlers) => Effect.matchCauseEffect(effect, handlers)
