import { Agent, type CorralEvent } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"

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
