/**
 * Zero-scheduler-cost floors for `claims` and `dag`: a schedule decided ahead of time in virtual
 * time (exact durations, no CPU), then replayed with plain timers. During the replay each task
 * starts when the tasks it must follow have ended — the previous holder of each of its keys (or
 * its dependencies) and the previous task on its slot — so the replay makes no decision at run
 * time: one counter per task. What the replay takes over the bound is the share of the timers and
 * the event loop, which no scheduler in this process can avoid; what a scheduler takes over the
 * replay is its own cost (and its policy's, where the replay follows a better schedule).
 */
import { type Recorder, recordedWork } from "./schedule.ts"

/** A schedule in virtual time: when each task starts and which tasks it waits for. */
export interface Plan {
  /** Tasks that must end before task `i` starts. */
  readonly after: ReadonlyArray<ReadonlyArray<number>>
  /** The makespan in virtual time. */
  readonly makespanMs: number
}

export interface Policy {
  /** How long each task takes. */
  readonly durations: ReadonlyArray<number>
  readonly concurrency: number
  /** Whether task `i` may start now (its keys free, its dependencies done). */
  readonly ready: (i: number) => boolean
  /** Task `i` starts (called before `follows(i)`). */
  readonly onStart: (i: number) => void
  readonly onEnd: (i: number) => void
  /** The order in which waiting tasks are offered a slot. */
  readonly order: ReadonlyArray<number>
  /** The tasks task `i` follows besides the previous task on its slot. */
  readonly follows: (i: number) => ReadonlyArray<number>
}

/**
 * Runs a greedy scheduler in virtual time: whenever tasks end, every waiting task that `ready`
 * allows starts, in `order`, while slots remain. Returns the plan to replay.
 */
export const simulate = (policy: Policy): Plan => {
  const n = policy.durations.length
  const ends = new Float64Array(n)
  const after: Array<Array<number>> = Array.from({ length: n }, () => [])
  const freeSlots = Array.from({ length: policy.concurrency }, (_, slot) => policy.concurrency - 1 - slot)
  const lastOnSlot = new Array<number>(policy.concurrency).fill(-1)
  const slotOf = new Int32Array(n)
  let running: Array<number> = []
  let waiting = [...policy.order]
  let now = 0
  let makespan = 0
  while (waiting.length > 0 || running.length > 0) {
    const still: Array<number> = []
    for (const i of waiting) {
      if (freeSlots.length > 0 && policy.ready(i)) {
        const slot = freeSlots.pop()!
        slotOf[i] = slot
        policy.onStart(i)
        const previous = lastOnSlot[slot]!
        for (const j of policy.follows(i)) if (j !== previous) after[i]!.push(j)
        if (previous >= 0) after[i]!.push(previous)
        lastOnSlot[slot] = i
        ends[i] = now + policy.durations[i]!
        running.push(i)
      } else still.push(i)
    }
    waiting = still
    if (running.length === 0) throw new Error("simulate: no task can start and none is running")
    now = Math.min(...running.map((i) => ends[i]!))
    makespan = Math.max(makespan, now)
    running = running.filter((i) => {
      if (ends[i]! > now) return true
      policy.onEnd(i)
      freeSlots.push(slotOf[i]!)
      return false
    })
  }
  return { after, makespanMs: makespan }
}

/** All-or-nothing greedy over exclusive keys, in queue order: the policy of corral and of the greedy peer. */
export const claimsPlan = (keysOf: ReadonlyArray<ReadonlyArray<string>>, ms: number, concurrency: number): Plan => {
  const busy = new Set<string>()
  const lastHolder = new Map<string, number>()
  const follows = new Map<number, Array<number>>()
  return simulate({
    durations: keysOf.map(() => ms),
    concurrency,
    order: keysOf.map((_, i) => i),
    ready: (i) => keysOf[i]!.every((key) => !busy.has(key)),
    onStart: (i) => {
      const previous: Array<number> = []
      for (const key of keysOf[i]!) {
        busy.add(key)
        const holder = lastHolder.get(key)
        if (holder !== undefined && !previous.includes(holder)) previous.push(holder)
        lastHolder.set(key, i)
      }
      follows.set(i, previous)
    },
    onEnd: (i) => {
      for (const key of keysOf[i]!) busy.delete(key)
    },
    follows: (i) => follows.get(i) ?? []
  })
}

/** Greedy over a DAG, longest remaining path first: corral's policy when given exact estimates. */
export const dagPlan = (
  deps: ReadonlyArray<ReadonlyArray<number>>,
  durations: ReadonlyArray<number>,
  remaining: ReadonlyArray<number>,
  concurrency: number
): Plan => {
  const done = new Uint8Array(deps.length)
  const order = deps.map((_, i) => i).sort((a, b) => remaining[b]! - remaining[a]! || a - b)
  return simulate({
    durations,
    concurrency,
    order,
    ready: (i) => deps[i]!.every((dep) => done[dep] === 1),
    onStart: () => {},
    onEnd: (i) => {
      done[i] = 1
    },
    follows: (i) => deps[i]!
  })
}

/** Replays `plan` with plain timers: task `i` sleeps `durations[i]` once every task it follows has ended. */
export const replay = (plan: Plan, durations: ReadonlyArray<number>, recorded: Recorder): Promise<void> =>
  new Promise((resolve, reject) => {
    const n = durations.length
    const left = plan.after.map((list) => list.length)
    const next: Array<Array<number>> = Array.from({ length: n }, () => [])
    plan.after.forEach((list, i) => {
      for (const j of list) next[j]!.push(i)
    })
    let ended = 0
    const start = (i: number): void => {
      recordedWork(recorded, i, durations[i]!).then(() => {
        ended++
        for (const k of next[i]!) if (--left[k]! === 0) start(k)
        if (ended === n) resolve()
      }, reject)
    }
    for (let i = 0; i < n; i++) if (left[i] === 0) start(i)
  })
