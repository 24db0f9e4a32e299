import { Agent, Corral } from "@corral/core"
import { assert, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"

it.effect("smoke", () =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Corral.run([
      Agent.make("a", { run: Effect.succeed(1) }),
      Agent.make("b", { run: Effect.fail("boom") }),
      Agent.make("c", { run: Effect.sleep("10 seconds"), timeout: "1 second" }),
      Agent.make("d", { run: Effect.die(new Error("bug")) }),
      Agent.make("e", { run: Effect.void, claims: { write: ["x"] } }),
      Agent.make("f", { run: Effect.sleep("1 second"), claims: { write: ["x"] } }),
      Agent.make("g", { run: ({ a }) => Effect.succeed((a as number) + 1), dependsOn: ["a"] })
    ], { concurrency: 2 }))
    yield* TestClock.adjust("5 seconds")
    const result = yield* Fiber.join(fiber)
    console.log(result.outcomes.map((o) => `${o.agentId}:${o._tag}`))
    assert.strictEqual(result.outcomes.length, 7)
  }))
