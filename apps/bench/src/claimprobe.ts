/**
 * The `claims` bench case outside the harness, for A/B comparisons in alternating processes:
 * `node src/claimprobe.ts cpu [runs] [warm-up] [claims|plain|greedy|greedy-turn]` runs the 2,000-task workload in
 * real time and prints the median `process.cpuUsage()` per run (and of the main thread alone,
 * `process.threadCpuUsage()`: the rest is V8's helper threads, mostly the garbage collector's) and the
 * median wall time per run: corral with the tasks' claims (the
 * default), corral with no claims (the floor of an Effect-based run: fibers and `Effect.sleep`
 * timers alone), or the bench's all-or-nothing greedy peer (deciding after each end, or once per
 * event-loop turn). With `--expose-gc` and `CLAIMPROBE_GC=full`
 * each run follows two forced full collections, as each repetition of the bench does (it frees the
 * hidden classes of a run's garbage, see `shapes` in core's `runner.ts`). `node src/claimprobe.ts
 * virtual [maxBypass|default] [runs]` runs it under `TestClock` (exact 2 ms, no CPU cost: a
 * deterministic run for callgrind) and prints the makespan against the bound (and the median CPU of
 * the runs after the first); `instant` instead of `virtual` runs it under a clock that fires every
 * timer due at an instant in one phase before the scheduler's tasks run, as Node.js does
 * (`corralInstantMakespan`: where corral decides once per event-loop turn, `TestClock` delivers its
 * ends one at a time). `node src/claimprobe.ts seeds [count] [maxBypass|default]` runs random
 * workloads of four shapes (`claimJobs` seeds 1..count) under `TestClock` and prints, per shape, the
 * summed virtual makespans of corral (under `TestClock` and under the once-per-instant clock), of the greedy policy deciding once all the tasks ending at an
 * instant have ended (`claimsPlan`, the replay's plan) and of the greedy policy deciding after each end
 * (what the greedy peer does in real time), the summed bounds, and on how many seeds corral does
 * worse than each. `CORRAL_CORE` names another copy of `packages/core/src/index.ts` to load
 * instead of `@corral/core` (A/B of two versions).
 */
import * as Effect from "effect/Effect"
import { corralInstantMakespan, corralVirtualMakespan } from "./lib/claimsVirtual.ts"
import { recorder } from "./lib/schedule.ts"
import { busiestKeyCount, claimJobs } from "./lib/workload.ts"
import { claimsPlan } from "./lib/replay.ts"
import { greedyRun } from "./scenarios/claims.ts"

// `CORRAL_CORE=<folder>/index.ts` loads another copy of core's source (A/B in alternating processes).
const { Agent, Corral }: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")
const jobs = claimJobs(7, 2000, 50)
const workMs = 2
const concurrency = 32
const bound = Math.max((jobs.length * workMs) / concurrency, busiestKeyCount(jobs) * workMs)
const [mode = "cpu", a, b] = process.argv.slice(2)

const median = (values: Array<number>) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)]!

const fullGc = async (): Promise<void> => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (process.env.CLAIMPROBE_GC !== "full") return
  if (gc === undefined) throw new Error("CLAIMPROBE_GC=full needs node --expose-gc")
  await new Promise<void>((resolve) => setImmediate(resolve))
  gc()
  gc()
}

const oneRun = async (what: string): Promise<void> => {
  if (what === "greedy" || what === "greedy-turn") {
    await greedyRun({ jobs, workMs, concurrency, pairs: 0 }, recorder(jobs.length), what === "greedy-turn")
    return
  }
  const agents = jobs.map((job) =>
    Agent.make(
      job.id,
      what === "plain" ? { run: Effect.sleep(workMs) } : { run: Effect.sleep(workMs), claims: { write: job.keys } }
    )
  )
  const result = await Effect.runPromise(Corral.run(agents, { concurrency }))
  if (!result.allSucceeded) throw new Error("a run failed")
}

if (mode === "cpu") {
  const runs = Number(a ?? 20)
  const warm = Number(b ?? 5)
  const what = process.argv[5] ?? "claims"
  if (!["claims", "plain", "greedy", "greedy-turn"].includes(what))
    throw new Error(`unknown workload ${what}: claims, plain, greedy or greedy-turn`)
  const cpu: Array<number> = []
  const mainThread: Array<number> = []
  const wall: Array<number> = []
  for (let i = 0; i < warm + runs; i++) {
    await fullGc()
    const before = process.cpuUsage()
    const beforeThread = process.threadCpuUsage()
    const started = performance.now()
    await oneRun(what)
    const took = performance.now() - started
    const used = process.cpuUsage(before)
    const usedThread = process.threadCpuUsage(beforeThread)
    if (i >= warm) {
      cpu.push((used.user + used.system) / 1000)
      mainThread.push((usedThread.user + usedThread.system) / 1000)
      wall.push(took)
    }
  }
  const mainThreadMsPerRun = median(mainThread)
  const wallMsPerRun = median(wall)
  console.log(
    JSON.stringify({
      what,
      cpuMsPerRun: median(cpu),
      min: Math.min(...cpu),
      max: Math.max(...cpu),
      mainThreadMsPerRun,
      wallMsPerRun
    })
  )
} else if (mode === "seeds") {
  const shapes = [
    { count: 2000, keys: 50, concurrency: 32 },
    { count: 1000, keys: 20, concurrency: 16 },
    { count: 1000, keys: 100, concurrency: 64 },
    { count: 500, keys: 10, concurrency: 8 }
  ]
  const maxBypass = b === undefined || b === "default" ? undefined : Number(b)
  for (const shape of shapes) {
    const sum = { corral: 0, corralInstant: 0, greedy: 0, greedyEachEnd: 0, bound: 0 }
    const worse = { thanGreedy: 0, thanGreedyEachEnd: 0, instantThanGreedy: 0, instantThanGreedyEachEnd: 0 }
    for (let seed = 1; seed <= Number(a ?? 30); seed++) {
      const some = claimJobs(seed, shape.count, shape.keys)
      const keysOf = some.map((job) => job.keys)
      const corral = await corralVirtualMakespan({ Agent, Corral }, some, workMs, shape.concurrency, maxBypass)
      const corralInstant = await corralInstantMakespan({ Agent, Corral }, some, workMs, shape.concurrency, maxBypass)
      const greedy = claimsPlan(keysOf, workMs, shape.concurrency).makespanMs
      const greedyEachEnd = claimsPlan(keysOf, workMs, shape.concurrency, true).makespanMs
      sum.corral += corral
      sum.corralInstant += corralInstant
      sum.greedy += greedy
      sum.greedyEachEnd += greedyEachEnd
      sum.bound += Math.max((some.length * workMs) / shape.concurrency, busiestKeyCount(some) * workMs)
      if (corral > greedy) worse.thanGreedy++
      if (corral > greedyEachEnd) worse.thanGreedyEachEnd++
      if (corralInstant > greedy) worse.instantThanGreedy++
      if (corralInstant > greedyEachEnd) worse.instantThanGreedyEachEnd++
    }
    console.log(JSON.stringify({ ...shape, sum, corralWorse: worse }))
  }
} else {
  const maxBypass = a === undefined || a === "default" ? undefined : Number(a)
  let makespan = 0
  const cpu: Array<number> = []
  for (let i = 0; i < Number(b ?? 1); i++) {
    const before = process.cpuUsage()
    makespan = await (mode === "instant" ? corralInstantMakespan : corralVirtualMakespan)(
      { Agent, Corral },
      jobs,
      workMs,
      concurrency,
      maxBypass
    )
    const used = process.cpuUsage(before)
    if (i > 0) cpu.push((used.user + used.system) / 1000)
  }
  const ratio = Number((makespan / bound).toFixed(3))
  console.log(JSON.stringify({ makespanMs: makespan, bound, ratio, cpuMsPerRunAfterFirst: median(cpu) }))
}
