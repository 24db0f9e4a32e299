import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { isExitFast, unaryHandlers } from "../../src/internal/continuation.ts"

// continuation.ts relies on effect's `Exit` type id and on `matchCauseEffect` calling a handler of
// `length` 1 as it is. These fail when an effect upgrade changes either.
const effects: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
  ["Exit.void", Exit.void],
  ["Exit.fail", Exit.fail("e")],
  ["Exit.die", Exit.die(new Error("d"))],
  ["Effect.void", Effect.void],
  ["Effect.succeed", Effect.succeed(1)],
  ["Effect.fail", Effect.fail("e")],
  ["Effect.failCause", Effect.failCause(Cause.interrupt())],
  ["Effect.sync", Effect.sync(() => 1)],
  ["Effect.promise", Effect.promise(() => Promise.resolve(1))],
  ["Effect.gen", Effect.gen(function* () {})],
  ["Effect.map", Effect.map(Effect.succeed(1), (n) => n + 1)],
  ["Effect.never", Effect.never],
  ["Effect.sleep", Effect.sleep(1)]
]

describe("continuation (what an agent's continuation relies on in effect)", () => {
  it("isExitFast agrees with Exit.isExit on effects of every kind", () => {
    for (const [name, effect] of effects) assert.strictEqual(isExitFast(effect), Exit.isExit(effect), name)
    assert.isTrue(isExitFast(Exit.void))
    assert.isFalse(isExitFast(Effect.sync(() => 1)))
  })

  it.effect("matchCauseEffect runs the unary handlers with the value or the cause", () =>
    Effect.gen(function* () {
      const calls: Array<string> = []
      const handlers = unaryHandlers({
        onSuccess: (value) => Effect.sync(() => calls.push(`success ${String(value)}`)),
        onFailure: (cause) => Effect.sync(() => calls.push(`failure ${String(Cause.squash(cause))}`))
      })
      assert.strictEqual(handlers.onSuccess.length, 1)
      assert.isTrue(Object.hasOwn(handlers.onFailure, "length"))
      yield* Effect.matchCauseEffect(Effect.succeed(7), handlers)
      yield* Effect.matchCauseEffect(Effect.fail("boom"), handlers)
      assert.deepStrictEqual(calls, ["success 7", "failure boom"])
    })
  )
})
