import { VersionedCell } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"

describe("VersionedCell", () => {
  it.effect("concurrent optimistic updates all land, each retrying after a conflict", () =>
    Effect.gen(function* () {
      const cell = VersionedCell.make<ReadonlyArray<string>>([])
      const append = (item: string) =>
        cell.update((items) => Effect.as(Effect.sleep("1 second"), [...items, item]), {
          attempts: 10,
          backoff: "100 millis"
        })
      const fiber = yield* Effect.forkChild(Effect.all(["a", "b", "c"].map(append), { concurrency: "unbounded" }), {
        startImmediately: true
      })
      yield* TestClock.adjust("1 minute")
      yield* Fiber.join(fiber)
      const final = yield* cell.get
      assert.deepStrictEqual([...final.value].sort(), ["a", "b", "c"])
      assert.strictEqual(final.version, 3)
    })
  )

  it.effect("fails with ConflictError after the given attempts, backing off exponentially", () =>
    Effect.gen(function* () {
      const cell = VersionedCell.make(0)
      const tries: Array<number> = []
      const interfering = cell.update(
        (n) =>
          Effect.gen(function* () {
            tries.push(yield* Effect.clockWith((c) => c.currentTimeMillis))
            const now = yield* cell.get
            yield* cell.compareAndSet(now.version, now.value + 100)
            return n + 1
          }),
        { attempts: 4, backoff: "100 millis" }
      )
      const fiber = yield* Effect.forkChild(Effect.flip(interfering), { startImmediately: true })
      yield* TestClock.adjust("10 seconds")
      const error = yield* Fiber.join(fiber)
      assert.strictEqual(error._tag, "ConflictError")
      assert.strictEqual(error.attempts, 4)
      assert.deepStrictEqual(tries, [0, 100, 300, 700])
      assert.include(error.message, "4 attempts")
    })
  )

  it.effect("a bad backoff or attempts dies in the effect with InvalidOption naming the option; f never runs", () =>
    Effect.gen(function* () {
      const cell = VersionedCell.make(0)
      let calls = 0
      const f = (n: number) =>
        Effect.sync(() => {
          calls++
          return n + 1
        })
      const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
        [{ backoff: "soon" }, 'backoff: expected a duration such as "30 seconds"'],
        [{ backoff: -5 }, "backoff: must not be negative, got -5"],
        [{ backoff: {} }, "backoff: expected a duration such as"],
        [{ attempts: Number.NaN }, "attempts: must be a whole number of at least 1, got NaN"],
        [{ attempts: 0 }, "attempts: must be a whole number of at least 1, got 0"]
      ]
      for (const [options, message] of cases) {
        const update = cell.update(f, options as { readonly attempts?: number })
        const exit = yield* Effect.exit(update)
        assert.isTrue(Exit.isFailure(exit), JSON.stringify(options))
        if (Exit.isFailure(exit)) {
          const defect = Cause.squash(exit.cause)
          assert.instanceOf(defect, VersionedCell.InvalidOption)
          assert.include((defect as VersionedCell.InvalidOption).message, `VersionedCell.update ${message}`)
        }
      }
      assert.strictEqual(calls, 0)
      assert.deepStrictEqual(yield* cell.get, { value: 0, version: 0 })
    })
  )
})
