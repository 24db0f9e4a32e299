/**
 * Named token buckets shared by every agent of a run: requests per minute, tokens per minute, and a
 * pause for every caller after a provider answers 429 with `Retry-After`.
 *
 * Each bucket holds up to `burst` tokens (default `limit`) and refills continuously at
 * `limit / interval`. A take may weigh more than one token (an LLM call takes its estimated tokens
 * up front and `settle`s the difference once the real count is known). After a `pause` the bucket
 * restarts empty, so a paused provider is not hit by a burst when the pause ends.
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import { dual } from "effect/Function"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { InvalidRun, type Issue } from "./CorralError.ts"
import { type BucketConfig, TokenBucket } from "./internal/tokenBucket.ts"
import { intervalMillis } from "./DurationOption.ts"

/**
 * One bucket: `limit` tokens per `interval`, holding at most `burst` (default `limit`).
 *
 * @example
 * ```ts
 * import { RateLimiter } from "@corral/core"
 *
 * const openai: RateLimiter.Bucket = { limit: 60, interval: "1 minute", burst: 10 }
 * ```
 * @since 0.1.0
 * @category models
 */
export interface Bucket {
  readonly limit: number
  readonly interval: Duration.Input
  readonly burst?: number | undefined
}

/**
 * Buckets by name, e.g. `{ openai: { limit: 60, interval: "1 minute" } }`.
 *
 * @since 0.1.0
 * @category models
 */
export type Buckets = Readonly<Record<string, Bucket>>

/**
 * The answer of `tryTake`: the tokens were taken, or the caller should try again in `ms`.
 *
 * @since 0.1.0
 * @category models
 */
export type Probe = { readonly _tag: "Taken" } | { readonly _tag: "Wait"; readonly ms: number }

/**
 * A call was refused because of a rate limit; try again after `retryAfter` milliseconds. It is
 * retryable: a run retries agents that fail with it (see `Corral.Options.rateLimits`).
 *
 * @example
 * ```ts
 * import { RateLimiter } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const call = Effect.fail(new RateLimiter.RateLimited({ key: "openai", retryAfter: 30_000 }))
 * ```
 * @since 0.1.0
 * @category errors
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  key: Schema.String,
  retryAfter: Schema.Number
}) {
  override get message(): string {
    return `rate limited on ${JSON.stringify(this.key)}: retry after ${this.retryAfter} ms`
  }

  get isRetryable(): boolean {
    return true
  }
}

/**
 * The limiter. Unknown keys are defects (runs validate their agents' keys before starting), and so
 * are token counts that are not finite numbers of at least 0.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The bucket names. */
  readonly keys: ReadonlyArray<string>
  /** Takes `tokens` (default 1) if available now; never waits. */
  readonly tryTake: (key: string, tokens?: number) => Effect.Effect<Probe>
  /** Takes `tokens` (default 1), waiting as long as needed; callers are served in arrival order. */
  readonly take: (key: string, tokens?: number) => Effect.Effect<void>
  /** Corrects a weighted take once the real amount is known (returns or takes the difference). */
  readonly settle: (key: string, estimated: number, actual: number) => Effect.Effect<void>
  /** Makes every caller of `key` wait `retryAfter` (e.g. after a 429); the bucket restarts empty. */
  readonly pause: (key: string, retryAfter: Duration.Input) => Effect.Effect<void>
}

/**
 * The limiter service. `Corral.run` uses it for agents with a `rateLimit`, and for the keys its own
 * `rateLimits` option does not define.
 *
 * @since 0.1.0
 * @category services
 */
export class RateLimiter extends Context.Service<RateLimiter, Service>()("@corral/core/RateLimiter") {}

/**
 * Checks buckets; every problem is reported with the field that has it.
 *
 * @since 0.1.0
 * @category validation
 */
export const validateBuckets = (buckets: Buckets, field = "rateLimits"): ReadonlyArray<Issue> => {
  const issues: Array<Issue> = []
  for (const [key, bucket] of Object.entries(buckets)) {
    const at = `${field}.${key}`
    if (!(bucket.limit > 0) || !Number.isFinite(bucket.limit)) {
      issues.push({ field: `${at}.limit`, message: `must be a positive number, got ${bucket.limit}` })
    }
    const interval = intervalMillis(bucket.interval)
    if (Result.isFailure(interval)) issues.push({ field: `${at}.interval`, message: interval.failure })
    if (bucket.burst !== undefined && !(bucket.burst >= 1 && Number.isFinite(bucket.burst))) {
      issues.push({ field: `${at}.burst`, message: `must be at least 1, got ${bucket.burst}` })
    }
  }
  return issues
}

/**
 * The arithmetic of one bucket (tokens, refill, reservations, pauses), for limiters that keep the
 * state elsewhere, such as `SqliteRateLimiter` in a table shared by processes.
 *
 * @since 0.1.0
 * @category internals
 */
export { TokenBucket }

/**
 * A bucket's capacity and refill rate per millisecond.
 *
 * @since 0.1.0
 * @category internals
 */
export const configOf = (bucket: Bucket): BucketConfig => ({
  capacity: bucket.burst ?? bucket.limit,
  perMs: bucket.limit / Duration.toMillis(bucket.interval)
})

const withNow = <A>(f: (now: number) => A): Effect.Effect<A> =>
  Effect.clockWith((clock: Clock.Clock) => Effect.sync(() => f(clock.currentTimeMillisUnsafe())))

/**
 * What a limiter says of its keys when asked for another: `known: a, b`, or that it has none.
 *
 * @since 0.1.0
 * @category validation
 */
export const knownKeys = (keys: ReadonlyArray<string>): string =>
  keys.length === 0 ? "no rate limits are configured" : `known: ${keys.join(", ")}`

/**
 * Builds a limiter from valid buckets (see `validateBuckets`), starting full at the given time.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = (buckets: Buckets, now: number): Service => {
  const table = new Map<string, TokenBucket>()
  for (const [key, bucket] of Object.entries(buckets)) table.set(key, new TokenBucket(configOf(bucket), now))
  const get = (key: string): TokenBucket => {
    const bucket = table.get(key)
    if (bucket === undefined)
      throw new Error(`unknown rate limit ${JSON.stringify(key)} (${knownKeys([...table.keys()])})`)
    return bucket
  }
  const awaitPause = (bucket: TokenBucket): Effect.Effect<void> =>
    Effect.flatMap(
      withNow((now) => bucket.pausedUntil - now),
      (ms) => (ms > 0 ? Effect.andThen(Effect.sleep(ms), awaitPause(bucket)) : Effect.void)
    )
  return {
    keys: [...table.keys()],
    tryTake: (key, tokens = 1) => withNow((now) => get(key).tryTake(counted(key, tokens), now)),
    take: (key, tokens = 1) =>
      Effect.flatMap(
        withNow((now) => get(key).reserve(counted(key, tokens), now)),
        (wait) =>
          wait === 0
            ? Effect.void
            : Effect.sleep(wait).pipe(
                Effect.andThen(awaitPause(get(key))),
                Effect.onInterrupt(() => withNow((now) => get(key).settle(tokens, now)))
              )
      ),
    settle: (key, estimated, actual) =>
      withNow((now) => get(key).settle(counted(key, estimated) - counted(key, actual), now)),
    pause: (key, retryAfter) => withNow((now) => get(key).pause(Duration.toMillis(retryAfter), now))
  }
}

/**
 * `tokens`, when it is a finite number of at least 0; otherwise throws (a defect where a limiter
 * calls it, as an unknown key is). Another count would corrupt a bucket for good: a negative take
 * adds tokens, and after `NaN` every later take is free. Limiters of other packages
 * (`SqliteRateLimiter`) check with it too.
 *
 * @since 0.1.0
 * @category validation
 */
export const counted = (key: string, tokens: number): number => {
  if (typeof tokens === "number" && Number.isFinite(tokens) && tokens >= 0) return tokens
  throw new Error(
    `tokens for rate limit ${JSON.stringify(key)} must be a finite number of at least 0, got ${String(tokens)}`
  )
}

/**
 * A limiter with the buckets of `own` and, for every other key, those of `outer`: how a run with
 * its own `rateLimits` serves keys that only a `RateLimiter` layer around it defines.
 *
 * @since 0.1.0
 * @category constructors
 */
export const overlay = (own: Service, outer: Service): Service => {
  const pick = (key: string): Service => (own.keys.includes(key) ? own : outer)
  return {
    keys: [...own.keys, ...outer.keys.filter((key) => !own.keys.includes(key))],
    tryTake: (key, tokens) => pick(key).tryTake(key, tokens),
    take: (key, tokens) => pick(key).take(key, tokens),
    settle: (key, estimated, actual) => pick(key).settle(key, estimated, actual),
    pause: (key, retryAfter) => pick(key).pause(key, retryAfter)
  }
}

/**
 * Builds a limiter; invalid buckets fail with `InvalidRun` listing every problem.
 *
 * @example
 * ```ts
 * import { RateLimiter } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.make({ openai: { limit: 60, interval: "1 minute", burst: 10 } })
 *   yield* limiter.take("openai")
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (buckets: Buckets): Effect.Effect<Service, InvalidRun> => {
  const issues = validateBuckets(buckets)
  if (issues.length > 0) return Effect.fail(new InvalidRun({ issues }))
  return withNow((now) => makeUnsafe(buckets, now))
}

/**
 * A layer with the given buckets.
 *
 * @example
 * ```ts
 * import { Agent, Corral, RateLimiter } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const agents = [Agent.make("ask", { run: Effect.succeed("answer"), rateLimit: "openai" })]
 * const program = Corral.run(agents).pipe(
 *   Effect.provide(RateLimiter.layer({ openai: { limit: 60, interval: "1 minute", burst: 10 } }))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (buckets: Buckets): Layer.Layer<RateLimiter, InvalidRun> =>
  Layer.effect(RateLimiter, make(buckets))

/**
 * Takes `tokens` (default 1) from `key` before running `effect`.
 *
 * @example
 * ```ts
 * import { RateLimiter } from "@corral/core"
 * import type { Effect } from "effect"
 *
 * declare const callProvider: Effect.Effect<string>
 * const call = callProvider.pipe(RateLimiter.withToken("openai"))
 * const batch = RateLimiter.withToken(callProvider, "openai", 10)
 * ```
 * @since 0.1.0
 * @category combinators
 */
export const withToken: {
  (key: string, tokens?: number): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R | RateLimiter>
  <A, E, R>(effect: Effect.Effect<A, E, R>, key: string, tokens?: number): Effect.Effect<A, E, R | RateLimiter>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(effect: Effect.Effect<A, E, R>, key: string, tokens = 1): Effect.Effect<A, E, R | RateLimiter> =>
    Effect.andThen(
      RateLimiter.use((limiter) => limiter.take(key, tokens)),
      effect
    )
)

/**
 * Milliseconds to wait before retrying after `error`, when the error says so: a `RateLimited`, or
 * any error with a numeric or `Duration` `retryAfter` (such as effect/ai's `AiError` for a 429).
 *
 * @since 0.1.0
 * @category retrying
 */
export const retryAfterOf = (error: unknown): number | undefined => {
  if (typeof error !== "object" || error === null || !("retryAfter" in error)) return undefined
  const retryAfter = error.retryAfter
  if (typeof retryAfter === "number") return Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined
  return Duration.isDuration(retryAfter) ? Duration.toMillis(retryAfter) : undefined
}
