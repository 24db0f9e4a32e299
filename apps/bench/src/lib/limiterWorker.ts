// `node limiterWorker.ts <sqlite|memory> <db> <calls> <perSecond> <burst>`: takes one token per call and
// prints the time of each call (ms since the epoch) as a JSON array. `sqlite` shares the bucket with
// every process using <db>; `memory` has a bucket of its own.
import { RateLimiter } from "@corral/core"
import * as SqliteRateLimiter from "@corral/platform-node/SqliteRateLimiter"
import * as Effect from "effect/Effect"

const [mode, filename, calls, perSecond, burst] = process.argv.slice(2) as [string, string, string, string, string]
const buckets = { api: { limit: Number(perSecond), interval: "1 second" as const, burst: Number(burst) } }

const program = Effect.gen(function* () {
  const limiter =
    mode === "sqlite" ? yield* SqliteRateLimiter.scoped(filename, buckets) : yield* RateLimiter.make(buckets)
  const times: Array<number> = []
  for (let i = 0; i < Number(calls); i++) {
    yield* limiter.take("api")
    times.push(Date.now())
  }
  return times
})

Effect.runPromise(Effect.scoped(program)).then(
  (times) => process.stdout.write(JSON.stringify(times)),
  (error) => {
    process.stderr.write(String(error))
    process.exitCode = 1
  }
)
