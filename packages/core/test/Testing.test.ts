import { Agent, type CorralEvent } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"

describe("Testing", () => {
  it.effect("runScripted records every event and still passes each one to the caller's onEvent", () =>
    Effect.gen(function* () {
      const seen: Array<CorralEvent.CorralEvent["_tag"]> = []
      const timeline = new Testing.Timeline()
      const recorded = yield* Testing.runScripted(
        [Testing.scripted(timeline, "a", { duration: "1 second", result: 1 })],
        { onEvent: (event) => Effect.sync(() => seen.push(event._tag)) }
      )
      assert.isAbove(seen.length, 0)
      assert.deepStrictEqual(
        seen,
        recorded.events.map((event) => event._tag)
      )
    })
  )

  it.effect("runScripted result types are the union of the agents' result types", () =>
    Effect.gen(function* () {
      const recorded = yield* Testing.runScripted([
        Agent.make("n", { run: Effect.succeed(1) }),
        Agent.make("s", { run: Effect.succeed("one") })
      ])
      const values: Array<number | string> = recorded.result.succeeded.map((outcome) => outcome.value)
      assert.deepStrictEqual(values, [1, "one"])
    })
  )

  it.effect("advanceUntilDone with a step or limit it cannot use dies naming it (a step of 0 looped for ever)", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Effect.never)
      const cases = [
        [0, "1 hour", "Testing.advanceUntilDone step: must be a positive duration, got 0"],
        [
          "soon",
          "1 hour",
          'Testing.advanceUntilDone step: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        ["1 second", Number.NaN, "Testing.advanceUntilDone limit: must be a number of milliseconds, got NaN"]
      ] as const
      for (const [step, limit, message] of cases) {
        const exit = yield* Effect.exit(Testing.advanceUntilDone(fiber, step as never, limit as never))
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.strictEqual((defect as Error | undefined)?.message, message)
      }
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("a scripted agent with a duration it cannot use fails with a defect naming it, without waiting", () =>
    Effect.gen(function* () {
      const cases = [
        ["soon", 'expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'],
        [{ seconds: true }, "duration field seconds must be a number, got boolean"],
        [-1, "must not be negative, got -1"]
      ] as const
      for (const [duration, reason] of cases) {
        const agent = Testing.scripted(new Testing.Timeline(), "a", { duration: duration as never, result: 1 })
        const { result } = yield* Testing.runScripted([agent])
        const outcome = result.get("a")!
        assert.strictEqual(outcome._tag, "Failed", JSON.stringify(duration))
        assert.strictEqual(outcome.endedAt, 0)
        assert.strictEqual((outcome as { message?: string }).message, `Testing.scripted duration: ${reason}`)
      }
    })
  )

  it.effect("advanceUntilDone fails with NotDone once the limit is spent on a fiber that cannot finish", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Effect.never, { startImmediately: true })
      const error = yield* Effect.flip(Testing.advanceUntilDone(fiber, "1 minute", "1 hour"))
      assert.instanceOf(error, Testing.NotDone)
      assert.include(error.message, "still running after the TestClock moved 1h")
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("runScripted fails with NotDone on a run that cannot finish", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Testing.runScripted([Agent.make("stuck", { run: Effect.never })], { limit: "10 minutes" })
      )
      assert.strictEqual(error._tag, "NotDone")
    })
  )
})
