import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RateLimiter } from "effect/persistence"
import PQueue from "p-queue"
import { core, runAgents } from "../lib/core.ts"
import { metricAtMost, ratioAtMost } from "../lib/targets.ts"
import type { Approach, Sample, Scenario } from "../types.ts"

interface Params {
  readonly calls: number
  readonly perSecond: number
  readonly burst: number
}

const maxInWindow = (stamps: ReadonlyArray<number>, windowMs: number): number => {
  const sorted = [...stamps].sort((a, b) => a - b)
  let best = 0
  let end = 0
  for (let start = 0; start < sorted.length; start++) {
    while (end < sorted.length && sorted[end]! < sorted[start]! + windowMs) end++
    best = Math.max(best, end - start)
  }
  return best
}

const timed = async (body: (stamp: () => void) => Promise<unknown>): Promise<Sample> => {
  const stamps: Array<number> = []
  const start = performance.now()
  await body(() => stamps.push(performance.now() - start))
  const ms = performance.now() - start
  return { ms, metrics: { maxPerSecond: maxInWindow(stamps, 1000), maxPer200ms: maxInWindow(stamps, 200) } }
}

const limiterLayer = RateLimiter.layer.pipe(Layer.provide(RateLimiter.layerStoreMemory))

const effectLimiter: Approach<Params> = {
  name: "effect RateLimiter (token bucket, delay)",
  run: (p, { signal }) =>
    timed((stamp) => {
      const program = Effect.gen(function* () {
        const withLimiter = yield* RateLimiter.makeWithRateLimiter
        const limited = withLimiter({
          algorithm: "token-bucket",
          onExceeded: "delay",
          key: "bench",
          limit: p.burst,
          window: (p.burst * 1000) / p.perSecond
        })
        const calls = Array.from({ length: p.calls }, () => limited(Effect.sync(stamp)))
        yield* Effect.all(calls, { concurrency: "unbounded", discard: true })
      })
      return Effect.runPromise(Effect.provide(program, limiterLayer), { signal })
    })
}

const pqueue = (intervalCap: number, interval: number): Approach<Params> => ({
  name: `p-queue intervalCap ${intervalCap} / ${interval} ms`,
  run: (p) =>
    timed((stamp) => {
      const queue = new PQueue({ intervalCap, interval })
      return Promise.all(Array.from({ length: p.calls }, () => queue.add(stamp)))
    })
})

const buckets = (p: Params) => ({ bench: { limit: p.perSecond, interval: "1 second" as const, burst: p.burst } })

const corralWithToken: Approach<Params> = {
  name: "corral RateLimiter.withToken",
  run: async (p, { signal }) => {
    const { RateLimiter: Limiter } = await core()
    return timed((stamp) => {
      const calls = Array.from({ length: p.calls }, () => Limiter.withToken("bench")(Effect.sync(stamp)))
      const program = Effect.all(calls, { concurrency: "unbounded", discard: true })
      return Effect.runPromise(Effect.provide(program, Limiter.layer(buckets(p))), { signal })
    })
  }
}

const corralAgents: Approach<Params> = {
  name: "corral agents with rateLimit",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return timed((stamp) => {
      const agents = Array.from({ length: p.calls }, (_, i) =>
        Agent.make(`call-${i}`, { run: Effect.sync(stamp), rateLimit: "bench" })
      )
      return runAgents(agents, { concurrency: 64, rateLimits: buckets(p) }, signal)
    })
  }
}

export const ratelimit: Scenario<Params> = {
  name: "ratelimit",
  description:
    "300 calls issued at once through a limit of 50/s with a burst of 10 (a provider's request limit). " +
    "Does the limiter pace exactly, and does it ever exceed the limit in a sliding second?",
  floor:
    "ideal = (300 - 10 burst) / 50 per s = 5.8 s; ratio = median total / 5.8 s (below 1.00× means calls " +
    "went out faster than the limit allows); max/1 s and max/200 ms = most calls started in any sliding " +
    "window of that length (a 50/s bucket of 10 allows at most 60 and 20)",
  targets: [
    ...[corralWithToken.name, corralAgents.name].flatMap((name) => [
      ratioAtMost(`${name}: ratio ≤ 1.01× the ideal`, /calls/, name, 1.01),
      metricAtMost(`${name}: max/1 s ≤ 60`, /calls/, name, "maxPerSecond", 60, (v) => v.toFixed(0)),
      metricAtMost(`${name}: max/200 ms ≤ 20`, /calls/, name, "maxPer200ms", 20, (v) => v.toFixed(0))
    ])
  ],
  reps: 3,
  columns: [
    { key: "maxPerSecond", label: "max/1 s", format: (v) => v.toFixed(0) },
    { key: "maxPer200ms", label: "max/200 ms", format: (v) => v.toFixed(0) }
  ],
  approaches: [effectLimiter, pqueue(50, 1000), pqueue(10, 200), corralWithToken, corralAgents],
  cases: () => [
    {
      label: "300 calls, 50/s, burst 10",
      params: { calls: 300, perSecond: 50, burst: 10 },
      boundMs: 5800
    }
  ]
}
