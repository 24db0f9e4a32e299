import { Agent, Corral, type CorralEvent } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { neverReturns } from "./support/subscribers.ts"

const sums = (events: ReadonlyArray<CorralEvent.CorralEvent>) =>
  events.every((e) => e.progress.pending + e.progress.running + e.progress.done === e.progress.total)

const finishedTags = (events: ReadonlyArray<CorralEvent.CorralEvent>) =>
  Object.fromEntries(events.flatMap((e) => (e._tag === "Finished" ? [[e.agentId, e.outcome._tag]] : [])))

describe("a run interrupted from outside", () => {
  it.effect("Effect.timeout around it: the subscriber gets Finished for every agent, then RunFinished", () =>
    Effect.gen(function* () {
      const events: Array<CorralEvent.CorralEvent> = []
      const run = Corral.run(
        [
          Agent.make("quick", { run: Effect.succeed(1) }),
          Agent.make("slow", { run: Effect.sleep("1 hour") }),
          Agent.make("later", { run: Effect.sleep("1 hour"), dependsOn: ["slow"] })
        ],
        { onEvent: (event) => Effect.sync(() => events.push(event)) }
      ).pipe(Effect.timeoutOption("1 minute"))
      const fiber = yield* Effect.forkChild(run, { startImmediately: true })
      yield* TestClock.adjust("1 minute")
      const result = yield* Fiber.join(fiber)
      assert.isTrue(result._tag === "None")
      assert.deepStrictEqual(finishedTags(events), { quick: "Succeeded", slow: "Interrupted", later: "Cancelled" })
      const last = events.at(-1)!
      assert.strictEqual(last._tag, "RunFinished")
      assert.deepStrictEqual(last._tag === "RunFinished" && last.stopped, { _tag: "Stopped", reason: "interrupted" })
      assert.strictEqual(last.progress.done, 3)
      assert.strictEqual(events.filter((e) => e._tag === "RunFinished").length, 1)
      assert.isTrue(sums(events))
    })
  )

  it.effect("a subscriber that never returns holds the interruption for the grace only, then is interrupted", () =>
    Effect.gen(function* () {
      const entered = yield* Deferred.make<void>()
      const detached = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        Corral.run([Agent.make("a", { run: Effect.never })], {
          onEvent: neverReturns(entered, detached)
        }),
        { startImmediately: true }
      )
      yield* Deferred.await(entered)
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber), { startImmediately: true })
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(interrupting.pollUnsafe())
      assert.isFalse(yield* Deferred.isDone(detached))
      yield* TestClock.adjust(1)
      yield* Fiber.join(interrupting)
      yield* Deferred.await(detached)
    })
  )

  it.effect("a nested run and its enclosing run both report how they ended", () =>
    Effect.gen(function* () {
      const outer: Array<CorralEvent.CorralEvent> = []
      const inner: Array<CorralEvent.CorralEvent> = []
      const started = yield* Deferred.make<void>()
      const nested = Agent.make("nested", {
        run: Corral.run(
          [
            Agent.make("deep", { run: Effect.andThen(Deferred.succeed(started, undefined), Effect.never) }),
            Agent.make("after", { run: Effect.void, dependsOn: ["deep"] })
          ],
          { onEvent: (event) => Effect.sync(() => inner.push(event)) }
        )
      })
      const fiber = yield* Effect.forkChild(
        Corral.run([nested], { onEvent: (event) => Effect.sync(() => outer.push(event)) }),
        { startImmediately: true }
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(finishedTags(inner), { deep: "Interrupted", after: "Cancelled" })
      assert.deepStrictEqual(finishedTags(outer), { nested: "Interrupted" })
      for (const events of [inner, outer]) {
        assert.strictEqual(events.at(-1)!._tag, "RunFinished")
        assert.isTrue(sums(events))
      }
    })
  )

  it.effect("interrupted before its first agent started: every agent is Cancelled, RunFinished follows", () =>
    Effect.gen(function* () {
      const events: Array<CorralEvent.CorralEvent> = []
      // A buffer of 6 makes the run yield for its subscriber after its 3rd event, the last `Queued`, before any agent starts.
      const fiber = yield* Effect.forkChild(
        Corral.run([Agent.make("a", { run: Effect.void }), Agent.make("b", { run: Effect.void })], {
          eventBuffer: 6,
          onEvent: (event) => Effect.sync(() => events.push(event))
        }),
        { startImmediately: true }
      )
      assert.isUndefined(fiber.pollUnsafe())
      yield* Fiber.interrupt(fiber)
      assert.isFalse(events.some((e) => e._tag === "Started"))
      assert.deepStrictEqual(finishedTags(events), { a: "Cancelled", b: "Cancelled" })
      assert.strictEqual(events.at(-1)!._tag, "RunFinished")
      assert.isTrue(sums(events))
    })
  )
})
