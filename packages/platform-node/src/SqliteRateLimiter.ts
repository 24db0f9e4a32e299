/**
 * Rate limits shared by every process that opens the same database: a `RateLimiter` whose buckets
 * live in a SQLite table (by default in the file where `corral run` keeps its claims), so two runs
 * on one machine share a provider's budget instead of each getting all of it.
 *
 * Every take, settle and pause reads the bucket, applies the same arithmetic as the in-memory
 * limiter (`RateLimiter.TokenBucket`) and writes it back in one `BEGIN IMMEDIATE` transaction, so
 * reservations from all processes are served in the order they reach the database. A pause after a
 * 429 is stored with the bucket: every process waits it out. Each process applies its own bucket
 * configuration to the shared state, so processes sharing a key should configure it alike.
 *
 * @since 0.1.0
 */
import * as CorralError from "@corral/core/CorralError"
import * as RateLimiter from "@corral/core/RateLimiter"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * @since 0.1.0
 * @category errors
 */
export type LimiterError = SqlError.SqlError | Migrator.MigrationError | CorralError.InvalidRun

const createBuckets = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE rate_buckets (
    key TEXT PRIMARY KEY, tokens REAL NOT NULL, updated_at REAL NOT NULL, paused_until REAL NOT NULL)`
})

const migrate = Migrator.make({})({
  table: "corral_limits_migrations",
  loader: Migrator.fromRecord({ "1_create_rate_buckets": createBuckets })
})

interface Row {
  readonly tokens: number
  readonly updated_at: number
  readonly paused_until: number
}

/**
 * Builds the limiter over the `SqlClient` in context (creating its table). Buckets missing from the
 * table start full; existing ones keep their state.
 *
 * @example
 * ```ts
 * import * as SqliteRateLimiter from "@corral/platform-node/SqliteRateLimiter"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* SqliteRateLimiter.make({ openai: { limit: 50, interval: "1 second", burst: 10 } })
 *   return limiter
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  buckets: RateLimiter.Buckets
): Effect.Effect<RateLimiter.Service, LimiterError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const issues = RateLimiter.validateBuckets(buckets)
    if (issues.length > 0) return yield* new CorralError.InvalidRun({ issues })
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    const start = yield* Clock.currentTimeMillis
    for (const [key, bucket] of Object.entries(buckets)) {
      const capacity = RateLimiter.configOf(bucket).capacity
      yield* sql`INSERT INTO rate_buckets (key, tokens, updated_at, paused_until)
        VALUES (${key}, ${capacity}, ${start}, 0) ON CONFLICT (key) DO NOTHING`
    }
    const configs = new Map(Object.entries(buckets).map(([key, bucket]) => [key, RateLimiter.configOf(bucket)]))

    const withBucket = <A>(key: string, f: (bucket: RateLimiter.TokenBucket, now: number) => A): Effect.Effect<A> => {
      const config = configs.get(key)
      if (config === undefined)
        return Effect.die(
          new Error(`unknown rate limit ${JSON.stringify(key)} (${RateLimiter.knownKeys([...configs.keys()])})`)
        )
      return sql
        .withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const rows = yield* sql<Row>`SELECT tokens, updated_at, paused_until FROM rate_buckets WHERE key = ${key}`
            const bucket = new RateLimiter.TokenBucket(config, now)
            const row = rows[0]
            if (row !== undefined) {
              bucket.tokens = Math.min(config.capacity, Number(row.tokens))
              bucket.updatedAt = Number(row.updated_at)
              bucket.pausedUntil = Number(row.paused_until)
            }
            const result = f(bucket, now)
            yield* sql`INSERT INTO rate_buckets (key, tokens, updated_at, paused_until)
              VALUES (${key}, ${bucket.tokens}, ${bucket.updatedAt}, ${bucket.pausedUntil})
              ON CONFLICT (key) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at,
              paused_until = excluded.paused_until`
            return result
          })
        )
        .pipe(Effect.orDie)
    }

    const awaitPause = (key: string): Effect.Effect<void> =>
      Effect.flatMap(
        withBucket(key, (bucket, now) => bucket.pausedUntil - now),
        (ms) => (ms > 0 ? Effect.andThen(Effect.sleep(ms), awaitPause(key)) : Effect.void)
      )

    return {
      keys: [...configs.keys()],
      tryTake: (key, tokens = 1) =>
        withBucket(key, (bucket, now) => bucket.tryTake(RateLimiter.counted(key, tokens), now)),
      take: (key, tokens = 1) =>
        Effect.flatMap(
          withBucket(key, (bucket, now) => bucket.reserve(RateLimiter.counted(key, tokens), now)),
          (wait) =>
            wait === 0
              ? Effect.void
              : Effect.sleep(wait).pipe(
                  Effect.andThen(awaitPause(key)),
                  Effect.onInterrupt(() => withBucket(key, (bucket, now) => bucket.settle(tokens, now)))
                )
        ),
      settle: (key, estimated, actual) =>
        withBucket(key, (bucket, now) =>
          bucket.settle(RateLimiter.counted(key, estimated) - RateLimiter.counted(key, actual), now)
        ),
      pause: (key, retryAfter) => withBucket(key, (bucket, now) => bucket.pause(Duration.toMillis(retryAfter), now))
    } satisfies RateLimiter.Service
  })

/**
 * The limiter over its own connection to `filename` (created if missing).
 *
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import * as SqliteRateLimiter from "@corral/platform-node/SqliteRateLimiter"
 * import { Effect } from "effect"
 *
 * const agents = [Agent.make("ask", { rateLimit: "openai", run: Effect.succeed("answer") })]
 * Corral.run(agents).pipe(
 *   Effect.provide(SqliteRateLimiter.layer(".corral/locks.db", { openai: { limit: 50, interval: "1 second" } }))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  filename: string,
  buckets: RateLimiter.Buckets
): Layer.Layer<RateLimiter.RateLimiter, LimiterError> =>
  Layer.effect(RateLimiter.RateLimiter, scoped(filename, buckets))

/**
 * The limiter over its own connection to `filename`, open for the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const scoped = (
  filename: string,
  buckets: RateLimiter.Buckets
): Effect.Effect<RateLimiter.Service, LimiterError, Scope.Scope> =>
  Effect.flatMap(SqliteClient.make({ filename }), (sql) =>
    make(buckets).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  ).pipe(Effect.provide(Reactivity.layer))
