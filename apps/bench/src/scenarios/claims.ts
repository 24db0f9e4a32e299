import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import { type Mutex, mutexes } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { checkExclusive, type Recorder, recordedWork, timedAndChecked } from "../lib/schedule.ts"
import { duration } from "../format.ts"
import { corralInstantMakespan } from "../lib/claimsVirtual.ts"
import { claimsPlan, perCase, replay } from "../lib/replay.ts"
import { floorHolds, metricAtLeast, noWorseThan, overFastest, overFloor, ratioAtMost } from "../lib/targets.ts"
import { timerFloor } from "../lib/timerFloor.ts"
import { busiestKeyCount, type ClaimJob, claimJobs } from "../lib/workload.ts"
import type { Approach, Case, Sample, Scenario } from "../types.ts"
import { lockLayerCase } from "./lock-layer.ts"

export interface Params {
  readonly jobs: ReadonlyArray<ClaimJob>
  readonly workMs: number
  readonly concurrency: number
  readonly pairs: number
}

const median = (values: Array<number>): number => {
  values.sort((a, b) => a - b)
  return values[Math.floor(values.length / 2)] ?? Number.NaN
}

/**
 * Where the time goes, from the tasks' own timestamps: the median hand-off on the busiest key (one
 * holder's end to the next holder's start) and the median time a task's `workMs` of work took.
 */
const handoffs = (p: Params, recorded: Recorder): Record<string, number> => {
  const holders = new Map<string, Array<number>>()
  p.jobs.forEach((job, index) => {
    for (const key of job.keys) {
      const list = holders.get(key)
      if (list === undefined) holders.set(key, [index])
      else list.push(index)
    }
  })
  let busiest: Array<number> = []
  for (const list of holders.values()) if (list.length > busiest.length) busiest = list
  const order = [...busiest].sort((a, b) => recorded.starts[a]! - recorded.starts[b]!)
  const gaps = order.slice(1).map((next, i) => recorded.starts[next]! - recorded.ends[order[i]!]!)
  const work = Array.from(recorded.starts, (start, i) => recorded.ends[i]! - start)
  return { handoffUs: median(gaps) * 1000, taskMs: median(work) }
}

/**
 * Times `body`, which records each job's work in the recorder, then checks no key had two holders.
 * Also reports the process CPU the run took (`process.cpuUsage()`, the figure that load does not
 * inflate as much as wall time) and where the wall time went (`handoffs`).
 */
const checked = async (p: Params, body: (recorded: Recorder) => Promise<unknown>): Promise<Sample> => {
  let cpuMs = 0
  let seen: Recorder | undefined
  const sample = await timedAndChecked(
    p.jobs.length,
    async (recorded) => {
      seen = recorded
      const cpu = process.cpuUsage()
      await body(recorded)
      const used = process.cpuUsage(cpu)
      cpuMs = (used.user + used.system) / 1000
    },
    (recorded) =>
      checkExclusive(
        recorded,
        p.jobs.map((job) => job.keys)
      )
  )
  return { ms: sample.ms, metrics: { cpuMs, ...handoffs(p, seen!) } }
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
    checked(p, (recorded) => {
      const limit = pLimit(p.concurrency)
      const lock = mutexes<string>()
      const job = async (index: number, keys: ReadonlyArray<string>) => {
        const release = await lockAll(lock, keys)
        await recordedWork(recorded, index, p.workMs).finally(release)
      }
      return Promise.all(p.jobs.map((j, index) => limit(() => job(index, j.keys))))
    })
}

const locksThenSlot: Approach<Params> = {
  name: "locks one by one then slot",
  run: (p) =>
    checked(p, (recorded) => {
      const limit = pLimit(p.concurrency)
      const lock = mutexes<string>()
      const job = async (index: number, keys: ReadonlyArray<string>) => {
        const release = await lockAll(lock, keys)
        await limit(() => recordedWork(recorded, index, p.workMs)).finally(release)
      }
      return Promise.all(p.jobs.map((j, index) => job(index, j.keys)))
    })
}

/**
 * The fair peer: an all-or-nothing greedy scheduler. On every completion it starts, in queue order,
 * every waiting task whose keys are all free, while slots remain. No task holds a key while it waits.
 * With `perTurn` it decides once per event-loop turn instead (`setImmediate` after the first
 * completion of a turn, so after every timer due in that phase), as the virtual-time plan decides once
 * per instant.
 */
export const greedyRun = (p: Params, recorded: Recorder, perTurn = false): Promise<void> =>
  new Promise((resolve) => {
    const busy = new Set<string>()
    let waiting = p.jobs.map((_, index) => index)
    let running = 0
    let done = 0
    let queued = false
    const free = (keys: ReadonlyArray<string>) => keys.every((key) => !busy.has(key))
    const start = (index: number) => {
      const keys = p.jobs[index]!.keys
      for (const key of keys) busy.add(key)
      running++
      recordedWork(recorded, index, p.workMs).then(() => {
        for (const key of keys) busy.delete(key)
        running--
        done++
        if (done === p.jobs.length) resolve()
        else if (!perTurn) fill()
        else if (!queued) {
          queued = true
          setImmediate(fill)
        }
      })
    }
    const fill = () => {
      queued = false
      const still: Array<number> = []
      for (const index of waiting) {
        if (running < p.concurrency && free(p.jobs[index]!.keys)) start(index)
        else still.push(index)
      }
      waiting = still
    }
    fill()
  })

const greedy: Approach<Params> = {
  name: "all-or-nothing greedy",
  run: (p) => checked(p, (recorded) => greedyRun(p, recorded))
}

const greedyPerTurn: Approach<Params> = {
  name: "all-or-nothing greedy, once per turn",
  run: (p) => checked(p, (recorded) => greedyRun(p, recorded, true))
}

export const floorName = "timer floor (busiest key's chain alone)"

/**
 * The floor, measured in every repetition: the busiest key's holders one after another with nothing
 * else on the event loop, then the tasks on `concurrency` chains with no keys; the larger of the two
 * (see `timerFloor.ts`). Any valid schedule runs that key's holders in sequence.
 */
const floor: Approach<Params> = {
  name: floorName,
  run: (p) => timerFloor(busiestKeyCount(p.jobs), p.jobs.length, p.workMs, p.concurrency)
}

export const replayName = "replayed schedule (zero scheduler cost)"

const planOf = perCase((p: Params) => ({
  plan: claimsPlan(
    p.jobs.map((job) => job.keys),
    p.workMs,
    p.concurrency
  ),
  durations: p.jobs.map(() => p.workMs)
}))

/**
 * A reference, not a floor: the greedy policy's schedule, decided in virtual time once per case
 * (when the case is made), replayed with plain timers (see `replay.ts`).
 */
const replayed: Approach<Params> = {
  name: replayName,
  run: (p) => {
    const { plan, durations } = planOf(p)
    return checked(p, (recorded) => replay(plan, durations, recorded))
  }
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return checked(p, (recorded) => {
      const agents = p.jobs.map((j, index) =>
        Agent.make(j.id, {
          run: Effect.suspend(() => {
            recorded.begin(index)
            return Effect.sleep(p.workMs)
          }).pipe(Effect.tap(() => Effect.sync(() => recorded.end(index)))),
          claims: { write: j.keys }
        })
      )
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const contended = async (): Promise<Case<Params>> => {
  const jobs = claimJobs(7, 2000, 50)
  const params = { jobs, workMs: 2, concurrency: 32, pairs: 0 }
  const busiest = busiestKeyCount(jobs) * params.workMs
  const spread = (jobs.length * params.workMs) / params.concurrency
  const keysOf = jobs.map((job) => job.keys)
  const { plan } = planOf(params)
  const eachEnd = claimsPlan(keysOf, params.workMs, params.concurrency, true)
  const bound = Math.max(spread, busiest)
  const policy = await corralInstantMakespan(await core(), jobs, params.workMs, params.concurrency)
  return {
    label: "2,000 tasks × 2 ms, 1–3 of 50 keys each (seed 7), concurrency 32",
    params,
    boundMs: bound,
    notes: [
      `bound = max(total work / 32 = ${spread} ms, busiest key ${busiest / params.workMs} tasks × 2 ms = ${busiest} ms)`,
      `"${floorName}" measures both terms with real timers in every repetition: the busiest key's ${busiest / params.workMs} tasks one after another with nothing else on the event loop (chain alone), then the ${jobs.length.toLocaleString("en-US")} tasks on ${params.concurrency} chains with no keys (spread alone); its sample is the larger. Every valid schedule runs that key's holders in sequence; the "floor held" target checks that no approach's median is under the floor's fastest repetition`,
      `the greedy policy in virtual time (exact 2 ms, no CPU) takes ${plan.makespanMs} ms = ${(plan.makespanMs / bound).toFixed(2)}× the bound; "${replayName}" replays that schedule with plain timers and no decisions: what a fixed plan costs on this machine's timers, not a floor: a scheduler deciding in real time can beat it (the "remaining gap" rows measure corral against the timer floor and against the fastest approach of the same run)`,
      `the same greedy policy deciding after each end rather than once all the tasks ending at an instant have ended (what the greedy peer does in real time, where its event loop delivers ends one at a time) takes ${eachEnd.makespanMs} ms = ${(eachEnd.makespanMs / bound).toFixed(2)}× the bound`,
      `corral's own policy in virtual time (the same run under a clock that fires every timer due at an instant before the scheduler's tasks run, as Node.js does: its decisions without their CPU) takes ${policy} ms = ${(policy / bound).toFixed(2)}× the bound`,
      "every approach's schedule is checked from the tasks' own timestamps: two holders of a key overlapping fails it",
      "CPU: process.cpuUsage() over the run (medians); hand-off: one holder's end to the next holder's start on the busiest key; 2 ms task took: a task's own work (a late timer shows the process was busy)"
    ]
  }
}

const contendedCase = /^2,000 tasks/

export const claims: Scenario<Params> = {
  name: "claims",
  description:
    "Agents that need exclusive keys (files, named resources): how close does each scheduler get to the " +
    "best possible makespan while never letting two holders of a key overlap? Plus the raw speed of " +
    "corral's in-memory lock layer.",
  floor:
    "lower bound = max(total work / concurrency, total work of the busiest key); ratio = median / bound. The " +
    "timer floor: the same two terms measured with real timers in every repetition (the busiest key's tasks " +
    "one after another, the tasks on `concurrency` chains), the larger.",
  targets: [
    ratioAtMost("corral ≤ 1.05× the bound", contendedCase, "corral", 1.05, floorName),
    overFloor(
      "remaining gap: corral ≤ 1.05× the timer floor measured in the same run",
      contendedCase,
      "corral",
      floorName,
      1.05
    ),
    floorHolds("floor held: no approach's median under the timer floor's fastest repetition", contendedCase, floorName),
    noWorseThan("corral ahead of the all-or-nothing greedy peer", contendedCase, "corral", "all-or-nothing greedy"),
    overFloor(
      "corral ≤ 1.05× the zero-scheduler-cost replay of the greedy plan measured in the same run (a replay, not a floor)",
      contendedCase,
      "corral",
      replayName,
      1.05,
      { floor: "the replay", bound: "the bound" }
    ),
    overFastest(
      "remaining gap: corral ≤ 1.05× the fastest other approach measured in the same run",
      contendedCase,
      "corral",
      [slotThenLocks.name, locksThenSlot.name, greedy.name, greedyPerTurn.name, replayName],
      1.05
    ),
    metricAtLeast(
      "ResourceLocks in memory ≥ 200k uncontended acquire+release pairs/s",
      /^lock layer/,
      "ResourceLocks.tryAcquire + release",
      "pairsPerSec",
      200_000,
      (v) => `${Math.round(v).toLocaleString("en-US")} pairs/s`
    )
  ],
  steadyState: true,
  // Corral's code (the gate, the runner, effect's fiber loop) is still being compiled by V8 for about
  // eight runs after the after-GC samples' forced full GCs; the greedy peer's few closures are not.
  rewarm: 8,
  columns: [
    { key: "afterGcMs", label: "after GC", format: duration },
    { key: "cpuMs", label: "CPU", format: (v) => `${v.toFixed(0)} ms` },
    { key: "handoffUs", label: "hand-off (busiest key)", format: (v) => `${v.toFixed(0)} µs` },
    { key: "taskMs", label: "2 ms task took", format: (v) => `${v.toFixed(2)} ms` },
    { key: "chainMs", label: "chain alone", format: duration },
    { key: "spreadMs", label: "spread alone", format: duration },
    { key: "pairsPerSec", label: "pairs/s", format: (v) => Math.round(v).toLocaleString("en-US") }
  ],
  approaches: [floor, slotThenLocks, locksThenSlot, greedy, greedyPerTurn, replayed, corral],
  cases: async ({ quick }) => [await contended(), lockLayerCase(quick)]
}
