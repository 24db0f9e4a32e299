import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import { type Mutex, mutexes, sleep, timed } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { busiestKeyCount, type ClaimJob, claimJobs, measureSleep } from "../lib/workload.ts"
import type { Approach, Case, Scenario } from "../types.ts"
import { lockLayerCase } from "./lock-layer.ts"

export interface Params {
  readonly jobs: ReadonlyArray<ClaimJob>
  readonly workMs: number
  readonly concurrency: number
  readonly pairs: number
}

const lockAll = async (lock: (key: string) => Mutex, keys: ReadonlyArray<string>): Promise<() => void> => {
  for (const key of keys) await lock(key).acquire()
  return () => {
    for (const key of keys) lock(key).release()
  }
}

const slotThenLocks: Approach<Params> = {
  name: "slot then sorted locks",
  run: (p) =>
    timed(() => {
      const limit = pLimit(p.concurrency)
      const lock = mutexes<string>()
      const job = async (keys: ReadonlyArray<string>) => {
        const release = await lockAll(lock, keys)
        await sleep(p.workMs).finally(release)
      }
      return Promise.all(p.jobs.map((j) => limit(() => job(j.keys))))
    })
}

const locksThenSlot: Approach<Params> = {
  name: "locks one by one then slot",
  run: (p) =>
    timed(() => {
      const limit = pLimit(p.concurrency)
      const lock = mutexes<string>()
      const job = async (keys: ReadonlyArray<string>) => {
        const release = await lockAll(lock, keys)
        await limit(() => sleep(p.workMs)).finally(release)
      }
      return Promise.all(p.jobs.map((j) => job(j.keys)))
    })
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return timed(() => {
      const agents = p.jobs.map((j) => Agent.make(j.id, { run: Effect.sleep(p.workMs), claims: { write: j.keys } }))
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const contended = async (quick: boolean): Promise<Case<Params>> => {
  const jobs = claimJobs(7, 2000, 50)
  const params = { jobs, workMs: 2, concurrency: 32, pairs: 0 }
  const busiest = busiestKeyCount(jobs) * params.workMs
  const spread = (jobs.length * params.workMs) / params.concurrency
  const actual = await measureSleep(params.workMs, quick ? 10 : 50)
  return {
    label: "2,000 tasks × 2 ms, 1–3 of 50 keys each (seed 7), concurrency 32",
    params,
    boundMs: Math.max(spread, busiest),
    notes: [
      `bound = max(total work / 32 = ${spread} ms, busiest key ${busiest / params.workMs} tasks × 2 ms = ${busiest} ms)`,
      `a real 2 ms sleep takes ${actual.toFixed(2)} ms here, so even a perfect schedule lands near ${(actual / params.workMs).toFixed(2)}×`
    ]
  }
}

export const claims: Scenario<Params> = {
  name: "claims",
  description:
    "Agents that need exclusive keys (files, named resources): how close does each scheduler get to the " +
    "best possible makespan while never letting two holders of a key overlap? Plus the raw speed of " +
    "corral's in-memory lock layer.",
  floor: "lower bound = max(total work / concurrency, total work of the busiest key); ratio = median / bound",
  targets: ["corral ≤ 1.05× the bound", "ResourceLocks in memory ≥ 200k uncontended acquire+release pairs/s"],
  columns: [{ key: "pairsPerSec", label: "pairs/s", format: (v) => Math.round(v).toLocaleString("en-US") }],
  approaches: [slotThenLocks, locksThenSlot, corral],
  cases: async ({ quick }) => [await contended(quick), lockLayerCase(quick)]
}
