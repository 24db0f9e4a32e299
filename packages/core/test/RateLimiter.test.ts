import { CorralError, RateLimiter } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"

const now = Effect.clockWith((clock) => clock.currentTimeMillis)

describe("RateLimiter", () => {
  it.effect("releases tokens at limit / interval after a burst of `burst`", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.make({ openai: { limit: 60, interval: "1 minute", burst: 10 } })
      const times: Array<number> = []
      const fiber = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: 30 }),
          () => Effect.flatMap(limiter.take("openai"), () => Effect.map(now, (t) => times.push(t))),
          {
            concurrency: "unbounded",
            discard: true
          }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust("30 seconds")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(
        times.slice(0, 10),
        Array.from({ length: 10 }, () => 0)
      )
      assert.deepStrictEqual(
        times.slice(10),
        Array.from({ length: 20 }, (_, i) => (i + 1) * 1000)
      )
    })
  )

  it.effect("tryTake never waits and says how long to wait", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.make({ api: { limit: 2, interval: "1 second" } })
      assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Taken" })
      assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Taken" })
      assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Wait", ms: 500 })
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Taken" })
    })
  )

  it.effect("weighted takes are corrected by settle", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.make({ tpm: { limit: 1000, interval: "1 minute" } })
      yield* limiter.take("tpm", 800)
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 300), { _tag: "Wait", ms: 6000 })
      yield* limiter.settle("tpm", 800, 500)
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 300), { _tag: "Taken" })
      yield* limiter.settle("tpm", 300, 900)
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 1), { _tag: "Wait", ms: 24_060 })
    })
  )

  it.effect("a pause holds every caller until retryAfter, then the bucket restarts empty", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.make({ api: { limit: 10, interval: "1 second" } })
      yield* limiter.pause("api", "30 seconds")
      assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Wait", ms: 30_000 })
      const times: Array<number> = []
      const fiber = yield* Effect.forkChild(
        Effect.forEach([1, 2], () => Effect.flatMap(limiter.take("api"), () => Effect.map(now, (t) => times.push(t))), {
          concurrency: "unbounded",
          discard: true
        }),
        { startImmediately: true }
      )
      yield* TestClock.adjust("29 seconds")
      assert.deepStrictEqual(times, [])
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(times, [])
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(times, [30_100, 30_200])
    })
  )

  it.effect("a key the limiter does not have dies naming the key and the keys it has, or that it has none", () =>
    Effect.gen(function* () {
      const messages: Array<string> = []
      const both: ReadonlyArray<RateLimiter.Buckets> = [{ api: { limit: 1, interval: "1 second" } }, {}]
      for (const buckets of both) {
        const exit = yield* Effect.exit(
          Effect.void.pipe(RateLimiter.withToken("nope"), Effect.provide(RateLimiter.layer(buckets)))
        )
        if (Exit.isFailure(exit)) messages.push(String(Cause.squash(exit.cause)))
      }
      assert.deepStrictEqual(messages, [
        'Error: unknown rate limit "nope" (known: api)',
        'Error: unknown rate limit "nope" (no rate limits are configured)'
      ])
    })
  )

  it.effect("withToken (data-last and data-first) takes a token from the service before the effect", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(
        Effect.forEach(
          [1, 2, 3],
          (i) => (i === 2 ? RateLimiter.withToken(now, "api") : now.pipe(RateLimiter.withToken("api"))),
          {
            concurrency: "unbounded"
          }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust("10 seconds")
      const times = yield* Fiber.join(fiber)
      assert.deepStrictEqual(times, [0, 0, 1000])
    }).pipe(Effect.provide(RateLimiter.layer({ api: { limit: 1, interval: "1 second", burst: 2 } })))
  )

  it.effect(
    "a token count that is not a finite number of at least 0 is a defect naming the key, and the bucket still limits",
    () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimiter.make({ api: { limit: 1, interval: "1 second" } })
        for (const [name, attempt] of [
          ["take -5", limiter.take("api", -5)],
          ["take NaN", limiter.take("api", Number.NaN)],
          ["tryTake Infinity", limiter.tryTake("api", Number.POSITIVE_INFINITY)],
          ["settle NaN", limiter.settle("api", 1, Number.NaN)]
        ] as const) {
          const exit = yield* Effect.exit(attempt as Effect.Effect<unknown>)
          assert.isTrue(Exit.hasDies(exit), name)
          const message = String(Exit.isFailure(exit) ? exit.cause : "")
          assert.include(message, 'tokens for rate limit "api" must be a finite number of at least 0', name)
        }
        const times: Array<number> = []
        const fiber = yield* Effect.forkChild(
          Effect.forEach(
            [1, 2, 3],
            () => Effect.flatMap(limiter.take("api"), () => Effect.map(now, (t) => times.push(t))),
            {
              discard: true
            }
          ),
          { startImmediately: true }
        )
        yield* TestClock.adjust("10 seconds")
        yield* Fiber.join(fiber)
        assert.deepStrictEqual(times, [0, 1000, 2000])
      })
  )

  it.effect("invalid buckets fail with InvalidRun naming each field", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        RateLimiter.make({
          a: { limit: 0, interval: "1 second" },
          b: { limit: 1, interval: "soon" as never, burst: 0 }
        })
      )
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(RateLimiter.make({ a: { limit: 0, interval: "1 second" } }))
      assert.instanceOf(error, CorralError.InvalidRun)
      assert.deepStrictEqual(
        error.issues.map((issue) => issue.field),
        ["rateLimits.a.limit"]
      )
    })
  )

  it("RateLimited is a readable, retryable error with its retryAfter", () => {
    const error = new RateLimiter.RateLimited({ key: "openai", retryAfter: 30_000 })
    assert.strictEqual(error.message, 'rate limited on "openai": retry after 30000 ms')
    assert.isTrue(error.isRetryable)
    assert.strictEqual(RateLimiter.retryAfterOf(error), 30_000)
    assert.isUndefined(RateLimiter.retryAfterOf(new Error("x")))
  })
})
