/**
 * What a worker's agent continuation (`Stint` in `runner.ts`) costs in effect's run loop, paid once
 * per agent that suspends, made cheaper without changing what runs:
 *
 * - `isExitFast` tells an agent's effect that is already an `Exit` (run without a continuation) by
 *   one read of the `Exit` type id, as effect's own run loop does (`effectIsExit`): `Exit.isExit`
 *   tests it with `in`, and `Object.getPrototypeOf` of an effect of any shape calls into V8's
 *   runtime.
 * - `unaryHandlers` gives the continuation's handlers an own `length`: `Effect.matchCauseEffect`
 *   reads both handlers' `length` on every call (to wrap one that does not take one argument), and a
 *   function's own `length` is an accessor V8 answers through an API callback.
 *
 * `test/internal/continuation.test.ts` pins both against effect.
 */
import type * as Cause from "effect/Cause"
import type * as Effect from "effect/Effect"
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

/** `handlers`, each function given an own data `length` of 1 (the number of arguments it takes). */
export const unaryHandlers = (handlers: Handlers): Handlers => {
  Object.defineProperty(handlers.onSuccess, "length", unary)
  Object.defineProperty(handlers.onFailure, "length", unary)
  return handlers
}

const unary: PropertyDescriptor = { value: 1 }
