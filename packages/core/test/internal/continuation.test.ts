import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { isExitFast } from "../../src/internal/continuation.ts"

// continuation.ts relies on effect's `Exit` type id. This fails when an effect upgrade changes it.
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
})
