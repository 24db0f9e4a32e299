import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { Mutex } from "../lib/async.ts"
import { core } from "../lib/core.ts"
import type { Approach, Case, Sample } from "../types.ts"
import type { Params } from "./claims.ts"

const holder = { runId: "bench", agentId: "bench" }

const rate = (pairs: number, start: number): Sample => {
  const ms = performance.now() - start
  return { ms, metrics: { pairsPerSec: pairs / (ms / 1000) } }
}

const services = async (keys: number) => {
  const { Claims, ResourceLocks } = await core()
  if (typeof ResourceLocks?.makeMemory !== "function") throw new Error("n/a (ResourceLocks not available)")
  const requests = Array.from({ length: keys }, (_, i) => Result.getOrThrow(Claims.normalize({ write: [`k${i}`] }, {})))
  return { locks: ResourceLocks.makeMemory(), requests }
}

const tryAcquire: Approach<Params> = {
  name: "ResourceLocks.tryAcquire + release",
  run: async (p) => {
    const { locks, requests } = await services(64)
    const loop = Effect.gen(function* () {
      for (let i = 0; i < p.pairs; i++) {
        const attempt = yield* locks.tryAcquire(holder, requests[i % requests.length]!)
        if (attempt._tag !== "Acquired") return yield* Effect.die(new Error("uncontended acquire blocked"))
        yield* locks.release(attempt.lease)
      }
    })
    const start = performance.now()
    await Effect.runPromise(loop)
    return rate(p.pairs, start)
  }
}

const scopedAcquire: Approach<Params> = {
  name: "ResourceLocks.acquire (scoped)",
  run: async (p) => {
    const { locks, requests } = await services(64)
    const loop = Effect.gen(function* () {
      for (let i = 0; i < p.pairs; i++) yield* Effect.scoped(locks.acquire(holder, requests[i % requests.length]!))
    })
    const start = performance.now()
    await Effect.runPromise(loop)
    return rate(p.pairs, start)
  }
}

const promiseMutex: Approach<Params> = {
  name: "promise FIFO mutex (reference)",
  run: async (p) => {
    const table = Array.from({ length: 64 }, () => new Mutex())
    const start = performance.now()
    for (let i = 0; i < p.pairs; i++) {
      const mutex = table[i % table.length]!
      await mutex.acquire()
      mutex.release()
    }
    return rate(p.pairs, start)
  }
}

export const lockLayerCase = (quick: boolean): Case<Params> => {
  const pairs = quick ? 50_000 : 200_000
  return {
    label: `lock layer: ${pairs.toLocaleString("en-US")} uncontended acquire+release pairs on 64 keys, one fiber`,
    params: { jobs: [], workMs: 0, concurrency: 1, pairs },
    approaches: [tryAcquire, scopedAcquire, promiseMutex],
    notes: ["no floor: throughput is compared with the 200k pairs/s target"]
  }
}
