import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Deadlines from "../../src/internal/deadlines.ts"

/** The test clock, counting the sleeps (timers) in progress. */
const countingClock = Effect.clockWith((clock) => {
  const timers = { active: 0 }
  const counting: Clock.Clock = {
    currentTimeMillisUnsafe: () => clock.currentTimeMillisUnsafe(),
    currentTimeMillis: clock.currentTimeMillis,
    currentTimeNanosUnsafe: () => clock.currentTimeNanosUnsafe(),
    currentTimeNanos: clock.currentTimeNanos,
    monotonicTimeNanosUnsafe: () => clock.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: clock.monotonicTimeNanos,
    sleep: (duration) =>
      Effect.suspend(() => {
        timers.active++
        return Effect.ensuring(
          clock.sleep(duration),
          Effect.sync(() => timers.active--)
        )
      })
  }
  return Effect.succeed({ counting, timers })
})

/** Deadlines of `ms` in a scope of their own, on a clock counting its timers. */
const setup = (ms: number) =>
  Effect.gen(function* () {
    const { counting, timers } = yield* countingClock
    const scope = yield* Scope.make()
    const deadlines = yield* Deadlines.make(ms).pipe(Scope.provide(scope), Effect.provideService(Clock.Clock, counting))
    return { deadlines, timers, scope }
  })

/** A call that never ends by itself, recording its interruption. */
const hanging = () => {
  const state = { interrupted: false }
  const call = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (state.interrupted = true))))
  return { call, state }
}

const settle = Effect.gen(function* () {
  for (let i = 0; i < 5; i++) yield* Effect.yieldNow
})

describe("internal/deadlines", () => {
  it.effect("a call within its deadline returns its result; then no timer is left once its deadline passes", () =>
    Effect.gen(function* () {
      const { deadlines, timers } = yield* setup(1000)
      const gate = yield* Deferred.make<number>()
      const caller = yield* Effect.forkChild(deadlines.within(Deferred.await(gate), () => "late"))
      yield* settle
      assert.strictEqual(timers.active, 1)
      yield* Deferred.succeed(gate, 7)
      assert.strictEqual(yield* Fiber.join(caller), 7)
      yield* TestClock.adjust(1000)
      yield* settle
      assert.strictEqual(timers.active, 0)
    })
  )

  it.effect("past its deadline the call is interrupted, and has ended, before the caller fails with late()", () =>
    Effect.gen(function* () {
      const { deadlines } = yield* setup(1000)
      const { call, state } = hanging()
      const caller = yield* Effect.forkChild(
        deadlines
          .within(call, () => "late")
          .pipe(
            Effect.flip,
            Effect.map((error) => [error, state.interrupted])
          )
      )
      yield* TestClock.adjust(999)
      assert.isUndefined(caller.pollUnsafe())
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* Fiber.join(caller), ["late", true])
    })
  )

  it.effect("calls started at different times each fail at their own deadline", () =>
    Effect.gen(function* () {
      const { deadlines } = yield* setup(1000)
      const callers: Array<Fiber.Fiber<unknown, string>> = []
      for (const _ of [0, 1, 2]) {
        callers.push(yield* Effect.forkChild(deadlines.within(Effect.never, () => "late")))
        yield* TestClock.adjust(300)
      }
      const ended = () => callers.map((caller) => caller.pollUnsafe() !== undefined)
      yield* TestClock.adjust(99)
      assert.deepStrictEqual(ended(), [false, false, false])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(ended(), [true, false, false])
      yield* TestClock.adjust(299)
      assert.deepStrictEqual(ended(), [true, false, false])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(ended(), [true, true, false])
      yield* TestClock.adjust(300)
      assert.deepStrictEqual(ended(), [true, true, true])
      for (const caller of callers) assert.deepStrictEqual(yield* Fiber.await(caller), Exit.fail("late"))
    })
  )

  it.effect("interrupting the caller interrupts the call and drops its deadline", () =>
    Effect.gen(function* () {
      const { deadlines, timers } = yield* setup(1000)
      const { call, state } = hanging()
      const caller = yield* Effect.forkChild(deadlines.within(call, () => "late"))
      yield* settle
      yield* Fiber.interrupt(caller)
      assert.isTrue(state.interrupted)
      yield* TestClock.adjust(1000)
      yield* settle
      assert.strictEqual(timers.active, 0)
    })
  )

  it.effect("closing the scope ends the sleeper and its timer", () =>
    Effect.gen(function* () {
      const { deadlines, timers, scope } = yield* setup(1000)
      const gate = yield* Deferred.make<number>()
      const caller = yield* Effect.forkChild(deadlines.within(Deferred.await(gate), () => "late"))
      yield* settle
      yield* Deferred.succeed(gate, 1)
      assert.strictEqual(yield* Fiber.join(caller), 1)
      assert.strictEqual(timers.active, 1)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(timers.active, 0)
    })
  )
})
