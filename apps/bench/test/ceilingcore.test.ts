import { Agent } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Corral } from "../src/ceilingcore.ts"

describe("ceilingcore", () => {
  it.effect("rejects a repeated id before any agent starts", () =>
    Effect.gen(function* () {
      let started = 0
      const body = Effect.sync(() => {
        started++
      })
      const exit = yield* Effect.exit(
        Corral.run([Agent.make("a", { run: body }), Agent.make("a", { run: body })], { concurrency: 2 })
      )
      expect(Exit.isFailure(exit)).toBe(true)
      expect(started).toBe(0)
    })
  )

  it.effect("runs at most `concurrency` agents at once, each as itself, one outcome each in order", () =>
    Effect.gen(function* () {
      let running = 0
      let most = 0
      const agent = (id: string) =>
        Agent.make(id, {
          run: Effect.gen(function* () {
            running++
            most = Math.max(most, running)
            yield* Effect.sleep(10)
            running--
            return (yield* Agent.current)?.agentId
          })
        })
      const fiber = yield* Effect.forkChild(Corral.run(["a", "b", "c"].map(agent), { concurrency: 2 }))
      yield* TestClock.adjust(20)
      const result = yield* Fiber.join(fiber)
      expect(most).toBe(2)
      expect(result.outcomes.map((o) => (o._tag === "Succeeded" ? o.value : o._tag))).toEqual(["a", "b", "c"])
      expect(result.outcomes[2]!.startedAt).toBe(10)
    })
  )

  it.effect("interrupts the fibers an agent forked when it ends, in the caller's fiber or forked", () =>
    Effect.gen(function* () {
      for (const concurrency of [1, 2]) {
        const interrupted = yield* Deferred.make<void>()
        const run = Effect.gen(function* () {
          yield* Effect.forkChild(Effect.onInterrupt(Effect.never, () => Deferred.succeed(interrupted, undefined)))
          yield* Effect.yieldNow
        })
        const result = yield* Corral.run([Agent.make("a", { run }), Agent.make("b", { run: Effect.void })], {
          concurrency
        })
        expect(result.outcomes.map((o) => o._tag)).toEqual(["Succeeded", "Succeeded"])
        expect(yield* Deferred.isDone(interrupted)).toBe(true)
      }
    })
  )
})
