import { ToolCalls } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"

describe("ToolCalls.run", () => {
  it.effect("read-only calls run together; writes to one resource serialize; results keep their order", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const call = (name: string, seconds: number) =>
        Effect.gen(function* () {
          log.push(`start ${name} @${yield* Effect.clockWith((c) => c.currentTimeMillis)}`)
          yield* Effect.sleep(`${seconds} seconds`)
          return name
        })
      const fiber = yield* Effect.forkChild(
        ToolCalls.run([
          { name: "read_a", read: ["src/a.ts"], run: call("read_a", 2) },
          { name: "search", read: ["src/"], run: call("search", 2) },
          { name: "write_a", write: ["src/a.ts"], run: call("write_a", 1) },
          { name: "write_a_again", write: ["src/a.ts"], run: call("write_a_again", 1) },
          { name: "write_notes", write: ["notes.md"], run: call("write_notes", 1) }
        ]),
        { startImmediately: true }
      )
      yield* TestClock.adjust("10 seconds")
      const outcomes = yield* Fiber.join(fiber)
      assert.deepStrictEqual(
        outcomes.map((o) => (o._tag === "Succeeded" ? o.value : o._tag)),
        ["read_a", "search", "write_a", "write_a_again", "write_notes"]
      )
      assert.deepStrictEqual([...log].sort(), [
        "start read_a @0",
        "start search @0",
        "start write_a @2000",
        "start write_a_again @3000",
        "start write_notes @0"
      ])
    })
  )

  it.effect("a failing call fails alone", () =>
    Effect.gen(function* () {
      const outcomes = yield* ToolCalls.run([
        { name: "ok", read: ["x"], run: Effect.succeed(1) },
        { name: "bad", write: ["y"], run: Effect.fail("denied") }
      ])
      assert.deepStrictEqual(
        outcomes.map((o) => o._tag),
        ["Succeeded", "Failed"]
      )
    })
  )
})
