import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import PQueue from "p-queue"
import { bytes, fixed } from "../format.ts"
import { runPool } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { heapProbe } from "../lib/heap.ts"
import type { Approach, Case, Sample, Scenario } from "../types.ts"

interface Params {
  readonly n: number
  readonly concurrency: number
  readonly profile: boolean
}

type Task = (index: number) => void

const noop: Task = () => {}

const measure = async (
  params: Params,
  body: (items: Array<number>, task: Task) => Promise<unknown>
): Promise<Sample> => {
  const items = Array.from({ length: params.n }, (_, i) => i)
  const probe = params.profile ? heapProbe(params.n) : undefined
  const start = performance.now()
  const kept = await body(items, probe?.probe ?? noop)
  const ms = performance.now() - start
  if (!probe) return { ms, metrics: { usPerTask: (ms * 1000) / params.n } }
  const heap = probe.finish(kept)
  return { ms, metrics: { bytesPerTask: heap.bytesPerItem, peakBytes: heap.peakBytes } }
}

const pool: Approach<Params> = {
  name: "hand-written pool",
  run: (p) => measure(p, (items, task) => runPool(items, p.concurrency, task))
}

const plimit: Approach<Params> = {
  name: "p-limit",
  run: (p) =>
    measure(p, (items, task) => {
      const limit = pLimit(p.concurrency)
      return Promise.all(items.map((i) => limit(() => task(i))))
    })
}

const pqueue: Approach<Params> = {
  name: "p-queue",
  run: (p) =>
    measure(p, (items, task) => {
      const queue = new PQueue({ concurrency: p.concurrency })
      return Promise.all(items.map((i) => queue.add(() => task(i))))
    })
}

const forEach: Approach<Params> = {
  name: "Effect.forEach",
  run: (p, { signal }) =>
    measure(p, (items, task) => {
      const f = p.profile ? (i: number) => Effect.sync(() => task(i)) : () => Effect.void
      return Effect.runPromise(Effect.forEach(items, f, { concurrency: p.concurrency, discard: true }), { signal })
    })
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return measure(p, (items, task) => {
      const work = (i: number) => (p.profile ? Effect.sync(() => task(i)) : Effect.void)
      const agents = items.map((i) => Agent.make(`a${i}`, { run: work(i) }))
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const sizes = (quick: boolean) => (quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000])

const cases = ({ quick }: { readonly quick: boolean }): ReadonlyArray<Case<Params>> =>
  sizes(quick).map((n) => ({
    label: `N = ${n.toLocaleString("en-US")}, concurrency 64`,
    params: { n, concurrency: 64, profile: false },
    profile: { n, concurrency: 64, profile: true },
    reps: n >= 1_000_000 ? 3 : 5
  }))

export const scheduling: Scenario<Params> = {
  name: "scheduling",
  description:
    "Overhead of the scheduler itself: N no-op tasks at concurrency 64. Time covers building the work " +
    "(including Agent.make for corral) and running it to completion.",
  floor:
    "the hand-written promise pool (64 async workers pulling from a shared index), measured in the same " +
    "repetition; ratio = approach median / pool median. Memory: one extra profiled run per approach, " +
    "full GC then heapUsed at 10 points during the run and once after it (result still referenced); " +
    "B/task = (peak live heap - post-GC baseline with inputs built) / N.",
  targets: ["corral ≤ 1.5 µs per agent and ≤ 1 KB per agent, flat in N"],
  warmup: true,
  timeoutMs: 300_000,
  floorApproach: "hand-written pool",
  columns: [
    { key: "usPerTask", label: "µs/task", format: fixed(3) },
    { key: "bytesPerTask", label: "B/task", format: bytes },
    { key: "peakBytes", label: "peak heap", format: bytes }
  ],
  approaches: [pool, plimit, pqueue, forEach, corral],
  cases
}
