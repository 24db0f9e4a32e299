import { Agent, Corral, ToolCalls } from "@corral/core"
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

  it.effect("a call that waits for its keys longer than claimTimeout ends ClaimTimedOut naming the holder", () =>
    Effect.gen(function* () {
      const holder = yield* Effect.forkChild(
        Corral.run([Agent.make("editor", { claims: { write: ["src/a.ts"] }, run: Effect.sleep("5 seconds") })]),
        { startImmediately: true }
      )
      const calls = yield* Effect.forkChild(
        ToolCalls.run(
          [
            { name: "write_a", write: ["src/a.ts"], run: Effect.succeed("written") },
            { name: "read_b", read: ["src/b.ts"], run: Effect.succeed("read") }
          ],
          { claimTimeout: "1 second" }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust("1 second")
      if (calls.pollUnsafe() === undefined) {
        yield* Fiber.interrupt(calls)
        yield* Fiber.interrupt(holder)
        return assert.fail("the calls still wait after 1 virtual second")
      }
      const outcomes = yield* Fiber.join(calls)
      const [write, read] = outcomes
      assert.strictEqual(write!._tag, "ClaimTimedOut")
      assert.strictEqual(write!.endedAt, 1000)
      assert.deepStrictEqual(write!._tag === "ClaimTimedOut" && write!.blockers, [
        { key: "src/a.ts", holder: "editor" }
      ])
      assert.strictEqual(read!._tag === "Succeeded" && read!.value, "read")
      yield* TestClock.adjust("4 seconds")
      yield* Fiber.join(holder)
    })
  )

  it.effect("a claimTimeout the run refuses is an InvalidRun naming it, and no call runs", () =>
    Effect.gen(function* () {
      let ran = 0
      const error = yield* Effect.flip(
        ToolCalls.run([{ name: "write", write: ["a.txt"], run: Effect.sync(() => ran++) }], {
          claimTimeout: "-1 seconds"
        })
      )
      assert.deepStrictEqual(
        error.issues.map((issue) => issue.field),
        ["claimTimeout"]
      )
      assert.strictEqual(ran, 0)
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

describe("ToolCalls.run with input of the wrong shape", () => {
  it.effect("fails with InvalidRun naming the call, inside the effect, and runs nothing", () =>
    Effect.gen(function* () {
      let ran = 0
      const run = Effect.sync(() => ran++)
      const notCalls = ToolCalls.run(undefined as unknown as ReadonlyArray<ToolCalls.ToolCall<number, never, never>>)
      const missing = ToolCalls.run([{ name: "ok", run }, null as unknown as ToolCalls.ToolCall<number, never, never>])
      const badWrite = ToolCalls.run([{ name: "write", write: "a.txt" as unknown as ReadonlyArray<string>, run }])
      const first = yield* Effect.flip(notCalls)
      assert.strictEqual(first._tag, "InvalidRun")
      assert.deepStrictEqual(
        first.issues.map((i) => `${i.field}|${i.message}`),
        ["calls|expected an array of tool calls, got undefined"]
      )
      const second = yield* Effect.flip(missing)
      assert.deepStrictEqual(
        second.issues.map((i) => `${i.index ?? "-"}|${i.field}|${i.message}`),
        ["-|calls[1]|expected a tool call { name, read, write, run }, got null"]
      )
      const third = yield* Effect.flip(badWrite)
      assert.deepStrictEqual(
        third.issues.map((i) => `${i.agentId}|${i.field}|${i.message}`),
        ["0:write|claims.write|expected an array of keys, got string"]
      )
      assert.strictEqual(ran, 0)
    })
  )
})
