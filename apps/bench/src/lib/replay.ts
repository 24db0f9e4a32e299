/**
 * Zero-scheduler-cost floors for `claims` and `dag`: a schedule decided ahead of time in virtual
 * time (exact durations, no CPU), then replayed with plain timers. During the replay a task may
 * start once the tasks it must follow have ended (the previous holder of each of its keys, or its
 * dependencies: one counter per task), and tasks start in the planned order while fewer than
 * `concurrency` run (a binary heap on the planned start). Slots are not pinned: with real timers
 * a task pinned to the slot the plan gave it waits for that slot's late previous task while others
 * are free. What the replay takes over the bound is the share of the timers and the event loop,
 * which no scheduler in this process can avoid; what a scheduler takes over the replay is its own
 * cost (and its policy's, where the replay follows a better schedule).
 */
import { type Recorder, recordedWork } from "./schedule.ts"

/** A schedule in virtual time: when each task starts and which tasks it waits for. */
export interface Plan {
  /** Tasks that must end before task `i` starts. */
  readonly after: ReadonlyArray<ReadonlyArray<number>>
  /** When task `i` starts in virtual time: the order of the replay. */
  readonly starts: ReadonlyArray<number>
  readonly concurrency: number
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
  /** The tasks task `i` follows. */
  readonly follows: (i: number) => ReadonlyArray<number>
}

/**
 * Runs a greedy scheduler in virtual time: whenever tasks end, every waiting task that `ready`
 * allows starts, in `order`, while slots remain — once all the tasks that end at that instant have
 * ended, or, with `perCompletion`, after each of them in turn (in the order they started), as an
 * online scheduler sees ends that its event loop delivers one at a time. Returns the plan to replay.
 */
export const simulate = (policy: Policy, perCompletion = false): Plan => {
  const n = policy.durations.length
  const ends = new Float64Array(n)
  const after: Array<Array<number>> = Array.from({ length: n }, () => [])
  const starts = new Array<number>(n).fill(0)
  let running: Array<number> = []
  let waiting = [...policy.order]
  let now = 0
  let makespan = 0
  const fill = (): void => {
    const still: Array<number> = []
    for (const i of waiting) {
      if (running.length < policy.concurrency && policy.ready(i)) {
        policy.onStart(i)
        after[i]!.push(...policy.follows(i))
        starts[i] = now
        ends[i] = now + policy.durations[i]!
        running.push(i)
      } else still.push(i)
    }
    waiting = still
  }
  fill()
  while (running.length > 0) {
    now = Math.min(...running.map((i) => ends[i]!))
    makespan = Math.max(makespan, now)
    const ending = running.filter((i) => ends[i]! <= now)
    running = running.filter((i) => ends[i]! > now)
    for (const i of ending) {
      policy.onEnd(i)
      if (perCompletion) fill()
    }
    if (!perCompletion) fill()
  }
  if (waiting.length > 0) throw new Error("simulate: no task can start and none is running")
  return { after, starts, concurrency: policy.concurrency, makespanMs: makespan }
}

/**
 * All-or-nothing greedy over exclusive keys, in queue order. By default it decides once every task
 * ending at an instant has ended (the replay's plan); with `perCompletion` after each end, as the
 * greedy peer does in real time and corral does under `TestClock` (which resumes one sleeper at a time).
 */
export const claimsPlan = (
  keysOf: ReadonlyArray<ReadonlyArray<string>>,
  ms: number,
  concurrency: number,
  perCompletion = false
): Plan => {
  const busy = new Set<string>()
  const lastHolder = new Map<string, number>()
  const follows = new Map<number, Array<number>>()
  return simulate(
    {
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
    },
    perCompletion
  )
}

/**
 * `make`, computed once per case's params and kept: a floor's plan is decided before its run, so
 * computing it in each run would put its CPU and garbage between the harness's collection and the
 * timed window, which no other approach has there.
 */
export const perCase = <P extends object, A>(make: (params: P) => A): ((params: P) => A) => {
  const made = new WeakMap<P, A>()
  return (params) => {
    let value = made.get(params)
    if (value === undefined) {
      value = make(params)
      made.set(params, value)
    }
    return value
  }
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

/** Replays `plan` with plain timers: task `i` sleeps `durations[i]`, in the planned order, once every task it follows has ended. */
export const replay = (plan: Plan, durations: ReadonlyArray<number>, recorded: Recorder): Promise<void> =>
  new Promise((resolve, reject) => {
    const n = durations.length
    const left = plan.after.map((list) => list.length)
    const next: Array<Array<number>> = Array.from({ length: n }, () => [])
    plan.after.forEach((list, i) => {
      for (const j of list) next[j]!.push(i)
    })
    const ready = new MinHeap((a, b) => plan.starts[a]! - plan.starts[b]! || a - b)
    let running = 0
    let ended = 0
    const fill = (): void => {
      while (running < plan.concurrency && ready.size > 0) {
        const i = ready.pop()
        running++
        recordedWork(recorded, i, durations[i]!).then(() => {
          running--
          ended++
          for (const k of next[i]!) if (--left[k]! === 0) ready.push(k)
          if (ended === n) resolve()
          else fill()
        }, reject)
      }
    }
    for (let i = 0; i < n; i++) if (left[i] === 0) ready.push(i)
    fill()
  })

class MinHeap {
  private readonly items: Array<number> = []
  private readonly less: (a: number, b: number) => number

  constructor(less: (a: number, b: number) => number) {
    this.less = less
  }

  get size(): number {
    return this.items.length
  }

  push(item: number): void {
    const items = this.items
    items.push(item)
    let i = items.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (this.less(items[i]!, items[parent]!) >= 0) break
      ;[items[i], items[parent]] = [items[parent]!, items[i]!]
      i = parent
    }
  }

  pop(): number {
    const items = this.items
    const top = items[0]!
    const last = items.pop()!
    if (items.length > 0) {
      items[0] = last
      let i = 0
      while (true) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < items.length && this.less(items[l]!, items[m]!) < 0) m = l
        if (r < items.length && this.less(items[r]!, items[m]!) < 0) m = r
        if (m === i) break
        ;[items[i], items[m]] = [items[m]!, items[i]!]
        i = m
      }
    }
    return top
  }
}
