import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Agent from "../src/Agent.ts"
import * as Corral from "../src/Corral.ts"
import * as ResourceLocks from "../src/ResourceLocks.ts"
import { waitCount } from "../src/internal/inherit.ts"

const cycleOfWaits = [
  Agent.make("a", {
    claims: { write: ["x"] },
    run: Effect.andThen(
      Effect.sleep("1 second"),
      Corral.run([Agent.make("inner", { claims: { write: ["y"] }, run: Effect.void })])
    )
  }),
  Agent.make("b", { claims: { write: ["y"] }, run: Effect.sleep("10 seconds") })
]

describe("ClaimDeadlock: the wait-for graph keeps no wait after its run", () => {
  it.effect("a nested wait is kept while it waits and dropped when the outer run is interrupted", () =>
    Effect.gen(function* () {
      const locks = ResourceLocks.makeMemory()
      const fiber = yield* Effect.forkChild(
        Corral.run(cycleOfWaits, { concurrency: 2 }).pipe(Effect.provideService(ResourceLocks.DefaultLocks, locks)),
        { startImmediately: true }
      )
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(waitCount(locks), 1)
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(waitCount(locks), 0)
    })
  )

  it.effect("a nested wait is dropped once granted, and none is left when the run ends", () =>
    Effect.gen(function* () {
      const locks = ResourceLocks.makeMemory()
      const fiber = yield* Effect.forkChild(
        Corral.run(cycleOfWaits, { concurrency: 2 }).pipe(Effect.provideService(ResourceLocks.DefaultLocks, locks)),
        { startImmediately: true }
      )
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 10000],
          ["Succeeded", 10000]
        ]
      )
      assert.strictEqual(waitCount(locks), 0)
    })
  )
})
