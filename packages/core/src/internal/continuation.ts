/**
 * A worker's agent continuation (`Stint` in `runner.ts`): its handlers, and `isExitFast`, which
 * tells an agent's effect that is already an `Exit` (run without a continuation) by one read of the
 * `Exit` type id, as effect's own run loop does (`effectIsExit`): `Exit.isExit` tests it with `in`,
 * and `Object.getPrototypeOf` of an effect of any shape calls into V8's runtime.
 * `test/internal/continuation.test.ts` pins it against effect.
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
