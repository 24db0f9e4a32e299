import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as RunnerDrain from "../src/RunnerDrain.ts"

/** A `running` poll that answers `answers` in turn (the last one from then on), counting its calls. */
const answering = (answers: ReadonlyArray<ReadonlyArray<string>>) => {
  let calls = 0
  const running = Effect.sync(() => answers[Math.min(calls++, answers.length - 1)]!)
  return { running, calls: () => calls }
}

const waitWith = (
  running: Effect.Effect<ReadonlyArray<string>, { readonly message: string }>,
  skip: Effect.Effect<void> = Effect.never
) => {
  const told: Array<ReadonlyArray<string>> = []
  const wait = RunnerDrain.wait({
    running,
    within: "10 seconds",
    every: "50 millis",
    skip,
    slowAfter: "1 second",
    slow: (agents) => told.push(agents)
  })
  return { wait, told }
}

describe("RunnerDrain.wait", () => {
  it.effect("ends as soon as no execution is left, without telling anyone", () =>
    Effect.gen(function* () {
      const poll = answering([["a", "b"], ["b"], []])
      const { wait, told } = waitWith(poll.running)
      const fiber = yield* Effect.forkChild(wait, { startImmediately: true })
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(yield* Fiber.join(fiber), { _tag: "Ended" })
      assert.strictEqual(poll.calls(), 3)
      assert.deepStrictEqual(told, [])
    })
  )

  it.effect("a runner that never stops its executions: the wait ends at the bound naming them, told after 1 s", () =>
    Effect.gen(function* () {
      const { wait, told } = waitWith(answering([["a", "c"]]).running)
      const fiber = yield* Effect.forkChild(wait, { startImmediately: true })
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(told, [["a", "c"]])
      yield* TestClock.adjust("8999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(fiber), { _tag: "TimedOut", agents: ["a", "c"] })
    })
  )

  it.effect("a second stop request ends the wait at once", () =>
    Effect.gen(function* () {
      const again = yield* Deferred.make<void>()
      const { wait } = waitWith(answering([["a"]]).running, Deferred.await(again))
      const fiber = yield* Effect.forkChild(wait, { startImmediately: true })
      yield* TestClock.adjust("200 millis")
      yield* Deferred.succeed(again, undefined)
      assert.deepStrictEqual(yield* Fiber.join(fiber), { _tag: "Skipped", agents: ["a"] })
    })
  )

  it.effect("a poll the database does not answer ends the wait with the last answer and the reason", () =>
    Effect.gen(function* () {
      let calls = 0
      const running = Effect.suspend(() =>
        calls++ === 0 ? Effect.succeed(["b"]) : Effect.fail({ message: "the database does not answer" })
      )
      const { wait } = waitWith(running)
      const fiber = yield* Effect.forkChild(wait, { startImmediately: true })
      yield* TestClock.adjust("50 millis")
      assert.deepStrictEqual(yield* Fiber.join(fiber), {
        _tag: "Unknown",
        agents: ["b"],
        reason: "the database does not answer"
      })
      assert.strictEqual(calls, 2)
    })
  )
})

describe("RunnerDrain naming", () => {
  const a = { agent: "a", runner: "10.0.0.5:4001" }
  const b = { agent: "b", runner: "10.0.0.5:4001" }
  const c = { agent: "c", runner: "10.0.0.6:4001" }
  const d = { agent: "d", runner: undefined }

  it("groups the agents by runner, in order, an unknown runner without a name", () => {
    assert.strictEqual(RunnerDrain.byRunner([a, b]), "a, b on runner 10.0.0.5:4001")
    assert.strictEqual(RunnerDrain.byRunner([a, c, b, d]), "a, b on runner 10.0.0.5:4001; c on runner 10.0.0.6:4001; d")
    assert.strictEqual(RunnerDrain.byRunner([d]), "d")
  })

  it("says where they may still be running", () => {
    assert.strictEqual(RunnerDrain.whereRunning([a, b]), " on runner 10.0.0.5:4001")
    assert.strictEqual(RunnerDrain.whereRunning([d]), " on their runners")
    assert.strictEqual(RunnerDrain.whereRunning([a, c, d]), ": a on runner 10.0.0.5:4001; c on runner 10.0.0.6:4001; d")
  })
})
