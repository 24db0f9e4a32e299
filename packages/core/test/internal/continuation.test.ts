import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import {
  agentFrame,
  direct,
  enter,
  entering,
  isExitFast,
  laidOutAsContinuation,
  type Owner,
  under
} from "../../src/internal/continuation.ts"

/** An owner that answers each exit with a description of it, and counts the calls. */
const describing = () => {
  const calls = { succeeded: 0, failed: 0 }
  const owner: Owner = {
    succeeded: (value) => {
      calls.succeeded++
      return Effect.succeed(`ok ${String(value)}`)
    },
    failed: (cause) => {
      calls.failed++
      return Effect.succeed(Cause.hasInterruptsOnly(cause) ? "interrupted" : `failed ${String(Cause.squash(cause))}`)
    }
  }
  return { owner, calls }
}

/** An owner that records each agent's value or failure in `seen`, then answers `next()`. */
const recording = (seen: Array<unknown>, next: () => Effect.Effect<unknown>): Owner => ({
  succeeded: (value) => {
    seen.push(value)
    return next()
  },
  failed: (cause) => {
    seen.push(`failed ${String(Cause.squash(cause))}`)
    return next()
  }
})

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

  it("under builds the frame Effect.matchCauseEffect builds, with the owner after effect's fields", () => {
    const { owner } = describing()
    const frame = agentFrame(owner)
    const effect = Effect.sync(() => 1)
    const ours = under(frame, effect) as unknown as Record<string, unknown>
    const [args = "", success = "", failure = ""] = Object.getOwnPropertyNames(ours)
    const handlers = {
      onSuccess: ours[success] as (value: unknown) => Effect.Effect<unknown>,
      onFailure: ours[failure] as (cause: Cause.Cause<unknown>) => Effect.Effect<unknown>
    }
    const theirs = Effect.matchCauseEffect(effect, handlers) as unknown as Record<string, unknown>
    assert.strictEqual(ours, frame as unknown, "one frame, pointed at the effect")
    assert.strictEqual(Object.getPrototypeOf(ours), Object.getPrototypeOf(theirs))
    assert.deepStrictEqual(Object.getOwnPropertyNames(ours), [...Object.getOwnPropertyNames(theirs), "owner"])
    assert.deepStrictEqual(Object.getOwnPropertySymbols(ours), Object.getOwnPropertySymbols(theirs))
    for (const key of Object.getOwnPropertyNames(theirs)) assert.strictEqual(ours[key], theirs[key], key)
    assert.strictEqual(ours[args], effect)
    assert.strictEqual(ours.owner, owner)
    assert.isTrue(laidOutAsContinuation(theirs, effect, handlers))
  })

  it.effect("one frame runs the owner's handler of each exit in turn", () =>
    Effect.gen(function* () {
      const { owner, calls } = describing()
      const frame = agentFrame(owner)
      assert.strictEqual(
        yield* under(
          frame,
          Effect.sync(() => 1)
        ),
        "ok 1"
      )
      assert.strictEqual(yield* under(frame, Effect.fail("e")), "failed e")
      assert.strictEqual(yield* under(frame, Effect.die("d")), "failed d")
      assert.strictEqual(yield* under(frame, Effect.interrupt), "interrupted")
      assert.strictEqual(
        yield* under(
          frame,
          Effect.promise(() => Promise.resolve(2))
        ),
        "ok 2"
      )
      assert.deepStrictEqual(calls, { succeeded: 2, failed: 3 })
    })
  )

  it.effect("a handler may run the next effect under the same frame (a worker's next agent)", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const effects = [
        Effect.succeed(1),
        Effect.yieldNow.pipe(Effect.as(2)),
        Effect.fail("e"),
        Effect.promise(() => Promise.resolve(3))
      ]
      let index = 0
      const next = (): Effect.Effect<unknown> =>
        index < effects.length ? under(frame, effects[index++]!) : Effect.succeed(seen)
      const frame = agentFrame(recording(seen, next))
      assert.deepStrictEqual(yield* next(), [1, 2, "failed e", 3])
    })
  )

  it.effect("a handler may enter the next effect under the frame itself: the frame takes its exit", () =>
    Effect.gen(function* () {
      assert.isTrue(entering, "the installed effect's frame evaluation: push itself, answer its effect")
      const seen: Array<unknown> = []
      const effects = [
        Effect.succeed(1),
        Effect.fail("e"),
        Effect.yieldNow.pipe(Effect.as(2)),
        Effect.die("d"),
        Effect.promise(() => Promise.resolve(3))
      ]
      let index = 0
      const next = (): Effect.Effect<unknown> =>
        index < effects.length ? enter(frame, Fiber.getCurrent(), effects[index++]!) : Effect.succeed(seen)
      const frame = agentFrame(recording(seen, next))
      assert.deepStrictEqual(yield* under(frame, Effect.succeed(0)), [0, 1, "failed e", 2, "failed d", 3])
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
