import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Agent, Corral, RateLimiter } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { Reactivity } from "effect/reactivity"
import * as SqliteClient from "../src/SqliteClient.ts"
import * as SqliteRateLimiter from "../src/SqliteRateLimiter.ts"
import * as RateLimitWorker from "./support/rateLimitWorker.ts"

const tempDb = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "corral-limits-")), "locks.db")

/**
 * A process taking `calls` tokens from a 50/s burst-10 bucket shared through `db`, from when `parties`
 * workers on `barrier` are ready (a loaded machine can start one process seconds after the other).
 */
const runWorker = (db: string, calls: number, barrier: string, parties: number) =>
  Effect.tryPromise({
    try: () =>
      RateLimitWorker.runWorker({
        mode: "sqlite",
        db,
        calls,
        perSecond: 50,
        burst: 10,
        barrier: { dir: barrier, parties }
      }),
    catch: (error) => error as Error
  })

describe("SqliteRateLimiter", () => {
  it.live("two processes × 100 calls through one 50/s burst-10 bucket never exceed 60 calls in any second", () =>
    Effect.gen(function* () {
      const db = tempDb()
      const barrier = fs.mkdtempSync(path.join(path.dirname(db), "barrier-"))
      const [a, b] = yield* Effect.all([runWorker(db, 100, barrier, 2), runWorker(db, 100, barrier, 2)], {
        concurrency: 2
      })
      const all = [...a!, ...b!]
      assert.strictEqual(all.length, 200)
      // Judged by the span each token was due in (asked … granted), not by when a loaded machine
      // resumed the caller; a limiter that let each process have its own bucket hands out ≈ 117.
      const peak = RateLimitWorker.mostSurelyInWindow(all, 1000)
      assert.isAtMost(peak, 60, `peak ${peak} calls in one sliding second`)
      // Both processes were served throughout, not one after the other.
      const granted = (calls: ReadonlyArray<RateLimitWorker.Call>) => calls.map((call) => call.granted)
      assert.isBelow(Math.min(...granted(b!)), Math.max(...granted(a!)))
      assert.isBelow(Math.min(...granted(a!)), Math.max(...granted(b!)))
    })
  )

  it.live("a pause after a 429 in one limiter makes another limiter on the same file wait", () =>
    Effect.gen(function* () {
      const db = tempDb()
      const buckets: RateLimiter.Buckets = { api: { limit: 1000, interval: "1 second" } }
      const first = yield* SqliteRateLimiter.scoped(db, buckets)
      const second = yield* SqliteRateLimiter.scoped(db, buckets)
      assert.deepStrictEqual(yield* second.tryTake("api"), { _tag: "Taken" })
      yield* first.pause("api", "30 seconds")
      const probe = yield* second.tryTake("api")
      assert.strictEqual(probe._tag, "Wait")
      assert.isAbove(probe._tag === "Wait" ? probe.ms : 0, 29_000)
    }).pipe(Effect.scoped)
  )

  it.live("as the run's limiter, a RateLimited agent pauses the shared bucket and is retried", () =>
    Effect.gen(function* () {
      const db = tempDb()
      const limiter = yield* SqliteRateLimiter.scoped(db, { api: { limit: 100, interval: "1 second" } })
      let calls = 0
      const agent = Agent.make("call", {
        rateLimit: "api",
        run: Effect.suspend(() =>
          ++calls === 1
            ? Effect.fail(new RateLimiter.RateLimited({ key: "api", retryAfter: 50 }))
            : Effect.succeed("ok")
        )
      })
      const before = Date.now()
      const result = yield* Corral.run([agent]).pipe(Effect.provideService(RateLimiter.RateLimiter, limiter))
      assert.strictEqual(result.get("call")?._tag, "Succeeded")
      assert.strictEqual(result.get("call")?.attempts, 2)
      const sql = yield* SqliteClient.make({ filename: db }).pipe(Effect.provide(Reactivity.layer))
      const rows = yield* sql<{ paused_until: number }>`SELECT paused_until FROM rate_buckets WHERE key = 'api'`
      assert.isAtLeast(Number(rows[0]?.paused_until), before + 50)
    }).pipe(Effect.scoped)
  )

  it.effect(
    "a token count that is not a finite number of at least 0 is a defect, and the shared bucket is unchanged",
    () =>
      Effect.gen(function* () {
        const db = tempDb()
        const limiter = yield* SqliteRateLimiter.scoped(db, { api: { limit: 1, interval: "1 hour" } })
        for (const attempt of [
          limiter.take("api", -5),
          limiter.tryTake("api", Number.NaN),
          limiter.settle("api", 1, -3)
        ]) {
          const exit = yield* Effect.exit(attempt as Effect.Effect<unknown>)
          assert.isTrue(Exit.hasDies(exit))
          assert.include(
            String(Exit.isFailure(exit) ? exit.cause : ""),
            'tokens for rate limit "api" must be a finite number'
          )
        }
        assert.deepStrictEqual(yield* limiter.tryTake("api"), { _tag: "Taken" })
        assert.strictEqual((yield* limiter.tryTake("api"))._tag, "Wait")
      }).pipe(Effect.scoped)
  )

  it.effect("rejects invalid buckets with InvalidRun naming the field", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(SqliteRateLimiter.scoped(tempDb(), { api: { limit: 0, interval: "1 second" } }))
      assert.strictEqual(error._tag, "InvalidRun")
      assert.include(error.message, "rateLimits.api.limit")
    }).pipe(Effect.scoped)
  )
})
