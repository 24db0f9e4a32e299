/**
 * Where corral's time over the zero-scheduler-cost replay goes in `claims` and `dag`, from the tasks'
 * own timestamps: `node --expose-gc src/chainprobe.ts <claims|dag> [reps] [warm-up]` runs corral and
 * the replay (and, for claims, the all-or-nothing greedy peer) alternately in one process, each after a
 * young-generation GC, and walks each run's critical chain back from the last end: a task's enabler is
 * the latest-ending task it had to follow (the previous holder of one of its keys, or a dependency),
 * or the task whose end freed its slot: the latest end before its start, if that came after it was
 * ready (for claims only when every slot was taken at that end: there slots rarely bind, and the
 * ends of unrelated tasks fall between a key's release and its next holder's start). Along the chain the makespan splits exactly into the first start (from the
 * run's call), the chain's tasks at their nominal durations (`nominal`: the schedule's length, what
 * its decisions cost), their time over it (`late`: timers firing late), the gaps from an enabler's end
 * to the next start (`gaps`: hand-off latency and waits) and the last end to the run's return; `gc`
 * is the garbage collector's main-thread pauses during the run (`PerformanceObserver`, all of them,
 * not only those on the chain). Prints the medians per approach. `CORRAL_CORE` names another copy of `packages/core/src/index.ts`.
 */
import { PerformanceObserver } from "node:perf_hooks"
import * as Effect from "effect/Effect"
import { settleYoung } from "./lib/heap.ts"
import { claimsPlan, dagPlan, replay } from "./lib/replay.ts"
import { type Recorder, recorder } from "./lib/schedule.ts"
import { claimJobs, randomDag, remainingPath } from "./lib/workload.ts"
import { greedyRun } from "./scenarios/claims.ts"

const { Agent, Corral }: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")
const [shape = "claims", a, b] = process.argv.slice(2)
const reps = Number(a ?? 10)
const warm = Number(b ?? 8)

interface Workload {
  readonly durations: ReadonlyArray<number>
  /** The tasks task `i` must follow, whatever the schedule (dependencies), or its key mates (claims). */
  readonly constraints: ReadonlyArray<ReadonlyArray<number>>
  readonly keyed: boolean
  readonly concurrency: number
  readonly approaches: Record<string, (recorded: Recorder) => Promise<unknown>>
}

const run = (effect: Effect.Effect<{ readonly allSucceeded: boolean }, unknown>) =>
  Effect.runPromise(effect).then((result) => {
    if (!result.allSucceeded) throw new Error("a run failed")
  })

const claimsWorkload = (): Workload => {
  const jobs = claimJobs(7, 2000, 50)
  const keysOf = jobs.map((job) => job.keys)
  const holders = new Map<string, Array<number>>()
  keysOf.forEach((keys, i) => {
    for (const key of keys) holders.set(key, [...(holders.get(key) ?? []), i])
  })
  const mates = keysOf.map((keys, i) => [...new Set(keys.flatMap((key) => holders.get(key)!))].filter((j) => j !== i))
  const plan = claimsPlan(keysOf, 2, 32)
  const params = { jobs, workMs: 2, concurrency: 32, pairs: 0 }
  return {
    durations: jobs.map(() => 2),
    constraints: mates,
    keyed: true,
    concurrency: 32,
    approaches: {
      corral: (recorded) =>
        run(
          Corral.run(
            jobs.map((job, i) =>
              Agent.make(job.id, {
                run: Effect.suspend(() => {
                  recorded.begin(i)
                  return Effect.sleep(2)
                }).pipe(Effect.tap(() => Effect.sync(() => recorded.end(i)))),
                claims: { write: job.keys }
              })
            ),
            { concurrency: 32 }
          )
        ),
      replay: (recorded) =>
        replay(
          plan,
          params.jobs.map(() => 2),
          recorded
        ),
      greedy: (recorded) => greedyRun(params, recorded)
    }
  }
}

const dagWorkload = (): Workload => {
  const nodes = randomDag(11, 500)
  const durations = nodes.map((node) => node.ms)
  const plan = dagPlan(
    nodes.map((node) => node.deps),
    durations,
    remainingPath(nodes),
    16
  )
  return {
    durations,
    constraints: nodes.map((node) => node.deps),
    keyed: false,
    concurrency: 16,
    approaches: {
      corral: (recorded) =>
        run(
          Corral.run(
            nodes.map((node) =>
              Agent.make(node.id, {
                run: Effect.suspend(() => {
                  recorded.begin(node.index)
                  return Effect.sleep(node.ms)
                }).pipe(Effect.tap(() => Effect.sync(() => recorded.end(node.index)))),
                dependsOn: node.deps.map((dep) => nodes[dep]!.id),
                estimate: node.ms
              })
            ),
            { concurrency: 16 }
          )
        ),
      replay: (recorded) => replay(plan, durations, recorded)
    }
  }
}

/** How many tasks run at `t` (started at or before it, ending after it), leaving `except` out. */
const runningAt = (recorded: Recorder, t: number, except: number): number => {
  let count = 0
  for (let i = 0; i < recorded.starts.length; i++)
    if (i !== except && recorded.starts[i]! <= t && recorded.ends[i]! > t) count++
  return count
}

/** The task whose end let task `j` start, or -1 for one that started with the run. */
const enabler = (w: Workload, recorded: Recorder, j: number): number => {
  const start = recorded.starts[j]!
  let best = -1
  for (const k of w.constraints[j]!) {
    const end = recorded.ends[k]!
    if (end <= start && (best < 0 || end > recorded.ends[best]!)) best = k
  }
  const from = best < 0 ? Number.NEGATIVE_INFINITY : recorded.ends[best]!
  if (best >= 0 && w.keyed && runningAt(recorded, from, j) < w.concurrency) return best
  let slot = -1
  for (let k = 0; k < recorded.ends.length; k++) {
    const end = recorded.ends[k]!
    if (end <= start && end >= from && (slot < 0 || end > recorded.ends[slot]!)) slot = k
  }
  return slot >= 0 ? slot : best
}

const chain = (w: Workload, recorded: Recorder, began: number, ms: number): Record<string, number> => {
  let last = 0
  for (let i = 1; i < recorded.ends.length; i++) if (recorded.ends[i]! > recorded.ends[last]!) last = i
  let nominal = 0
  let late = 0
  let gaps = 0
  let length = 0
  let j = last
  while (true) {
    length++
    nominal += w.durations[j]!
    late += recorded.ends[j]! - recorded.starts[j]! - w.durations[j]!
    const k = enabler(w, recorded, j)
    if (k < 0) break
    gaps += recorded.starts[j]! - recorded.ends[k]!
    j = k
  }
  return {
    ms,
    first: recorded.starts[j]! - began,
    length,
    nominal,
    late,
    gaps,
    gapUs: (gaps / Math.max(1, length - 1)) * 1000,
    tail: began + ms - recorded.ends[last]!
  }
}

const median = (values: Array<number>): number => values.sort((x, y) => x - y)[Math.floor(values.length / 2)]!

/** The garbage collector's pauses on the main thread (start, duration), to sum those inside a run. */
const pauses: Array<[number, number]> = []
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) pauses.push([entry.startTime, entry.duration])
}).observe({ entryTypes: ["gc"] })

const gcWithin = (from: number, to: number): number => {
  let sum = 0
  for (const [at, ms] of pauses) if (at >= from && at < to) sum += ms
  return sum
}

const w = shape === "dag" ? dagWorkload() : claimsWorkload()
const names = Object.keys(w.approaches)
const results = new Map<string, Array<Record<string, number>>>()
for (let rep = 0; rep < warm + reps; rep++) {
  for (let k = 0; k < names.length; k++) {
    const name = names[(k + rep) % names.length]!
    await settleYoung()
    const recorded = recorder(w.durations.length)
    const began = performance.now()
    await w.approaches[name]!(recorded)
    const ms = performance.now() - began
    await new Promise<void>((resolve) => setImmediate(resolve))
    if (rep < warm) continue
    results.set(name, [
      ...(results.get(name) ?? []),
      { ...chain(w, recorded, began, ms), gc: gcWithin(began, began + ms) }
    ])
  }
}
for (const name of names) {
  const list = results.get(name)!
  const cells = Object.keys(list[0]!).map((key) => `${key} ${median(list.map((m) => m[key]!)).toFixed(2)}`)
  console.log(`${name.padEnd(8)} ${cells.join("  ")}`)
}
process.exit(0)
