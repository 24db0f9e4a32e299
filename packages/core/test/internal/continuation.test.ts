import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import { continuation, direct, isExitFast, laidOutAsContinuation } from "../../src/internal/continuation.ts"

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

  it("continuation builds the frame Effect.matchCauseEffect builds", () => {
    const handlers = {
      onSuccess: (value: unknown) => Effect.succeed(value),
      onFailure: (cause: Cause.Cause<unknown>) => Effect.exit(Effect.failCause(cause))
    }
    const effect = Effect.sync(() => 1)
    const ours = continuation(effect, handlers) as unknown as Record<string, unknown>
    const theirs = Effect.matchCauseEffect(effect, handlers) as unknown as Record<string, unknown>
    assert.strictEqual(Object.getPrototypeOf(ours), Object.getPrototypeOf(theirs))
    assert.deepStrictEqual(Object.getOwnPropertyNames(ours), Object.getOwnPropertyNames(theirs))
    assert.deepStrictEqual(Object.getOwnPropertySymbols(ours), Object.getOwnPropertySymbols(theirs))
    for (const key of Object.getOwnPropertyNames(theirs)) assert.strictEqual(ours[key], theirs[key], key)
  })

  it.effect("continuation runs the handler of the effect's exit", () =>
    Effect.gen(function* () {
      const handlers = {
        onSuccess: (value: unknown) => Effect.succeed(`ok ${String(value)}`),
        onFailure: (cause: Cause.Cause<unknown>) =>
          Effect.succeed(Cause.hasInterruptsOnly(cause) ? "interrupted" : `failed ${String(Cause.squash(cause))}`)
      }
      const one = Effect.sync(() => 1)
      assert.strictEqual(yield* continuation(one, handlers), "ok 1")
      assert.strictEqual(yield* continuation(Effect.fail("e"), handlers), "failed e")
      assert.strictEqual(yield* continuation(Effect.die("d"), handlers), "failed d")
      assert.strictEqual(yield* continuation(Effect.interrupt, handlers), "interrupted")
    })
  )

  it("continuation is built directly only over a frame laid out as it builds one", () => {
    const handlers = {
      onSuccess: (value: unknown) => Effect.succeed(value),
      onFailure: (cause: Cause.Cause<unknown>) => Effect.exit(Effect.failCause(cause))
    }
    const effect = Effect.sync(() => 1)
    const frame = Effect.matchCauseEffect(effect, handlers)
    assert.isTrue(laidOutAsContinuation(frame, effect, handlers), "effect's own frame")
    assert.isTrue(direct, "the installed effect's frame: continuation is the direct build")
    const [args = "", success = "", failure = ""] = Object.getOwnPropertyNames(frame)
    const fields = (entries: ReadonlyArray<readonly [PropertyKey, unknown]>) =>
      Object.assign(Object.create(Object.getPrototypeOf(frame)), Object.fromEntries(entries))
    const variants: ReadonlyArray<readonly [string, object]> = [
      [
        "reordered",
        fields([
          [success, handlers.onSuccess],
          [args, effect],
          [failure, handlers.onFailure]
        ])
      ],
      [
        "renamed",
        fields([
          ["~effect/Effect/arg", effect],
          [success, handlers.onSuccess],
          [failure, handlers.onFailure]
        ])
      ],
      [
        "an extra field",
        fields([
          [args, effect],
          [success, handlers.onSuccess],
          [failure, handlers.onFailure],
          ["x", 1]
        ])
      ],
      [
        "a field missing",
        fields([
          [args, effect],
          [success, handlers.onSuccess]
        ])
      ],
      [
        "handlers wrapped",
        fields([
          [args, effect],
          [success, (value: unknown) => handlers.onSuccess(value)],
          [failure, handlers.onFailure]
        ])
      ],
      [
        "a symbol field",
        Object.assign(
          fields([
            [args, effect],
            [success, handlers.onSuccess],
            [failure, handlers.onFailure]
          ]),
          { [Symbol.for("x")]: 1 }
        )
      ]
    ]
    for (const [name, variant] of variants) assert.isFalse(laidOutAsContinuation(variant, effect, handlers), name)
  })
})
