import { GCProfiler } from "node:v8"
import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import PQueue from "p-queue"
import { bytes, duration, fixed } from "../format.ts"
import { metricAtMost, noWorseThan } from "../lib/targets.ts"

const us = (value: number): string => `${value.toFixed(2)} µs`
import { runPool } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { heapProbe } from "../lib/heap.ts"
import type { Approach, Case, Sample, Scenario } from "../types.ts"

interface Params {
  readonly n: number
  readonly concurrency: number
  readonly profile: boolean
  /** Tasks await a resolved promise (`Effect.promise` for Effect approaches) instead of returning at once. */
  readonly yielding: boolean
}

type Task = (index: number) => unknown

const noop: Task = () => {}

const measure = async (
  params: Params,
  body: (items: Array<number>, task: Task) => Promise<unknown>
): Promise<Sample> => {
  const items = Array.from({ length: params.n }, (_, i) => i)
  const probe = params.profile ? heapProbe(params.n) : undefined
  const gc = probe ? undefined : new GCProfiler()
  gc?.start()
  const cpu = process.cpuUsage()
  const start = performance.now()
  const kept = await body(items, probe?.probe ?? noop)
  const ms = performance.now() - start
  if (!probe) {
    const used = process.cpuUsage(cpu)
    const pauses = gc!.stop()?.statistics ?? []
    const gcUs = pauses.reduce((sum, pause) => sum + pause.cost, 0)
    const perTask = (us: number) => us / params.n
    return {
      ms,
      metrics: {
        usPerTask: perTask(ms * 1000),
        cpuUsPerTask: perTask(used.user + used.system),
        gcUsPerTask: perTask(gcUs),
        majorGcs: pauses.filter((pause) => pause.gcType === "MarkSweepCompact").length
      }
    }
  }
  const heap = probe.finish(kept)
  return { ms, metrics: { bytesPerTask: heap.bytesPerItem, peakBytes: heap.peakBytes } }
}

const resolved = Promise.resolve()

/** The promise-side task: plain call, or one that awaits a resolved promise first. */
const promiseTask = (p: Params, task: Task) =>
  p.yielding
    ? async (i: number) => {
        await resolved
        task(i)
      }
    : task

/** The Effect-side task: `Effect.void` (or a probe), or `Effect.promise` of a resolved promise. */
const effectTask = (p: Params, task: Task) => {
  if (p.yielding) return (i: number) => Effect.promise(() => resolved.then(() => task(i)))
  return p.profile ? (i: number) => Effect.sync(() => task(i)) : () => Effect.void
}

const pool: Approach<Params> = {
  name: "hand-written pool",
  run: (p) => measure(p, (items, task) => runPool(items, p.concurrency, promiseTask(p, task)))
}

const plimit: Approach<Params> = {
  name: "p-limit",
  run: (p) =>
    measure(p, (items, task) => {
      const limit = pLimit(p.concurrency)
      const run = promiseTask(p, task)
      return Promise.all(items.map((i) => limit(() => run(i))))
    })
}

const pqueue: Approach<Params> = {
  name: "p-queue",
  run: (p) =>
    measure(p, (items, task) => {
      const queue = new PQueue({ concurrency: p.concurrency })
      const run = promiseTask(p, task)
      return Promise.all(items.map((i) => queue.add(() => run(i))))
    })
}

const forEach: Approach<Params> = {
  name: "Effect.forEach",
  run: (p, { signal }) =>
    measure(p, (items, task) => {
      const f = effectTask(p, task)
      return Effect.runPromise(Effect.forEach(items, f, { concurrency: p.concurrency, discard: true }), { signal })
    })
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return measure(p, (items, task) => {
      const work = effectTask(p, task)
      const agents = items.map((i) => Agent.make(`a${i}`, { run: work(i) }))
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const sizes = (quick: boolean) => (quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000])

const kind = (yielding: boolean) => (yielding ? "yielding agents" : "Effect.void agents")

const caseOf = (n: number, yielding: boolean): Case<Params> => ({
  label: `N = ${n.toLocaleString("en-US")}, concurrency 64, ${kind(yielding)}`,
  params: { n, concurrency: 64, profile: false, yielding },
  profile: { n, concurrency: 64, profile: true, yielding },
  reps: n >= 1_000_000 ? 3 : 5
})

const cases = ({ quick }: { readonly quick: boolean }): ReadonlyArray<Case<Params>> => [
  ...sizes(quick).map((n) => caseOf(n, false)),
  ...sizes(quick)
    .filter((n) => n >= 10_000)
    .map((n) => caseOf(n, true))
]

const large = /^N = 1(00,000|,000,000),/

export const scheduling: Scenario<Params> = {
  name: "scheduling",
  description:
    "Overhead of the scheduler itself: N no-op tasks at concurrency 64. Time covers building the work " +
    "(including Agent.make for corral) and running it to completion.",
  floor:
    "the hand-written promise pool (64 async workers pulling from a shared index), measured in the same " +
    "repetition; ratio = approach median / pool median. Memory: one extra profiled run per approach, " +
    "full GC then heapUsed at 10 points during the run and once after it (result still referenced); " +
    "B/task = (peak live heap - post-GC baseline with inputs built) / N. Steady state: every repetition runs " +
    "once right after two full GCs (the 'after GC' column) and once, after all of those and two untimed runs, " +
    "with only two young-generation GCs before it (the median and µs/task columns).",
  targets: [
    metricAtMost("corral ≤ 1.5 µs per agent at 100k and 1M (both agent kinds)", large, "corral", "usPerTask", 1.5, us),
    metricAtMost("corral ≤ 1 KB per agent at 100k and 1M", large, "corral", "bytesPerTask", 1024, bytes),
    noWorseThan("corral ahead of p-limit at 100k and 1M", large, "corral", "p-limit")
  ],
  warmup: true,
  steadyState: true,
  timeoutMs: 300_000,
  floorApproach: "hand-written pool",
  columns: [
    { key: "usPerTask", label: "µs/task", format: fixed(3) },
    { key: "cpuUsPerTask", label: "CPU µs/task", format: fixed(3) },
    { key: "gcUsPerTask", label: "GC µs/task", format: fixed(3) },
    { key: "majorGcs", label: "full GCs", format: fixed(0) },
    { key: "afterGcMs", label: "after GC", format: duration },
    { key: "bytesPerTask", label: "B/task", format: bytes },
    { key: "peakBytes", label: "peak heap", format: bytes }
  ],
  approaches: [pool, plimit, pqueue, forEach, corral],
  cases
}
