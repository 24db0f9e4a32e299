import { Agent, Corral, ResourceLocks } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"

/** The in-memory service behind a grant that takes time, as a database's does. */
const slowGrants = (): ResourceLocks.ResourceLocks["Service"] => {
  const memory = ResourceLocks.makeMemory()
  return {
    ...memory,
    tryAcquire: (holder, request) => Effect.andThen(Effect.sleep("10 millis"), memory.tryAcquire(holder, request))
  }
}

describe("Corral.run with a lock service whose grants take time", () => {
  it.effect("an agent blocked by a sibling whose grant was still in flight is woken when the sibling releases", () =>
    Effect.gen(function* () {
      const write = { write: ["ran.txt"] }
      const fiber = yield* Effect.forkChild(
        Corral.run(
          [
            Agent.make("first", { run: Effect.sleep("100 millis") }),
            Agent.make("second", { run: Effect.sleep("200 millis"), dependsOn: ["first"], claims: write }),
            Agent.make("third", { run: Effect.sleep("200 millis"), dependsOn: ["first"], claims: write })
          ],
          { concurrency: 4 }
        ).pipe(Effect.provideService(ResourceLocks.ResourceLocks, slowGrants())),
        { startImmediately: true }
      )
      yield* TestClock.adjust("10 seconds")
      const done = fiber.pollUnsafe()
      assert.isDefined(done, "the run finished")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome.agentId, outcome._tag]),
        [
          ["first", "Succeeded"],
          ["second", "Succeeded"],
          ["third", "Succeeded"]
        ]
      )
    })
  )
})
