/**
 * Schedule checks from timestamps the tasks record themselves: every approach in `claims` and `dag`
 * records when each task's work began and ended, and the scenario fails an approach whose schedule
 * broke the rules (two holders of a key overlapping, a node starting before a dependency ended).
 */
import type { Sample } from "../types.ts"
import { sleep } from "./async.ts"

/** Start and end times (performance.now()) of each task, by task index. */
export interface Recorder {
  readonly begin: (index: number) => void
  readonly end: (index: number) => void
  readonly starts: Float64Array
  readonly ends: Float64Array
}

export const recorder = (tasks: number): Recorder => {
  const starts = new Float64Array(tasks).fill(Number.NaN)
  const ends = new Float64Array(tasks).fill(Number.NaN)
  return {
    begin: (index) => {
      starts[index] = performance.now()
    },
    end: (index) => {
      ends[index] = performance.now()
    },
    starts,
    ends
  }
}

/** Thrown by a check; the harness reports the approach as failed with this message. */
export class ScheduleViolation extends Error {
  override readonly name = "ScheduleViolation"
}

const assertComplete = (recorded: Recorder): void => {
  for (let i = 0; i < recorded.starts.length; i++) {
    if (Number.isNaN(recorded.starts[i]!) || Number.isNaN(recorded.ends[i]!)) {
      throw new ScheduleViolation(`schedule violation: task ${i} never ran to completion`)
    }
  }
}

/** No two tasks holding one key overlapped in time. */
export const checkExclusive = (recorded: Recorder, keysOf: ReadonlyArray<ReadonlyArray<string>>): void => {
  assertComplete(recorded)
  const holders = new Map<string, Array<number>>()
  keysOf.forEach((keys, index) => {
    for (const key of keys) {
      const list = holders.get(key)
      if (list === undefined) holders.set(key, [index])
      else list.push(index)
    }
  })
  for (const [key, list] of holders) {
    list.sort((a, b) => recorded.starts[a]! - recorded.starts[b]!)
    for (let i = 1; i < list.length; i++) {
      const previous = list[i - 1]!
      const next = list[i]!
      if (recorded.starts[next]! < recorded.ends[previous]!) {
        throw new ScheduleViolation(`schedule violation: tasks ${previous} and ${next} held ${key} at the same time`)
      }
    }
  }
}

/** Every task started after all its dependencies ended. */
export const checkDependencies = (recorded: Recorder, depsOf: ReadonlyArray<ReadonlyArray<number>>): void => {
  assertComplete(recorded)
  depsOf.forEach((deps, index) => {
    for (const dep of deps) {
      if (recorded.starts[index]! < recorded.ends[dep]!) {
        throw new ScheduleViolation(`schedule violation: task ${index} started before its dependency ${dep} ended`)
      }
    }
  })
}

/**
 * Times `body`, which records each of `tasks` tasks' work in a fresh recorder, then checks the schedule
 * from what the tasks recorded (`check` throws a `ScheduleViolation`). Only `body` is timed.
 */
export const timedAndChecked = async (
  tasks: number,
  body: (recorded: Recorder) => Promise<unknown>,
  check: (recorded: Recorder) => void
): Promise<Sample> => {
  const recorded = recorder(tasks)
  const start = performance.now()
  await body(recorded)
  const ms = performance.now() - start
  check(recorded)
  return { ms }
}

/**
 * Where a run's time over the work bound went, from the tasks' own timestamps (the run began at
 * `began` and took `ms`): `lateMs`, the sum of (a task's end − its start − its duration) ÷
 * `concurrency` (what timers firing late added to the slots); `idleMs`, the makespan − the sum of
 * (end − start) ÷ `concurrency` (slot time with no task running: the start, hand-offs and the tail);
 * `firstMs`, from `began` to the first start; `afterLastMs`, from the last end to the run's return.
 * When total work ÷ concurrency is the bound, makespan = bound + `lateMs` + `idleMs`.
 */
export const timeSplit = (
  recorded: Recorder,
  durations: ReadonlyArray<number>,
  concurrency: number,
  began: number,
  ms: number
): Record<string, number> => {
  let busy = 0
  let late = 0
  let first = Number.POSITIVE_INFINITY
  let last = Number.NEGATIVE_INFINITY
  for (let i = 0; i < durations.length; i++) {
    const took = recorded.ends[i]! - recorded.starts[i]!
    busy += took
    late += took - durations[i]!
    first = Math.min(first, recorded.starts[i]!)
    last = Math.max(last, recorded.ends[i]!)
  }
  return {
    lateMs: late / concurrency,
    idleMs: ms - busy / concurrency,
    firstMs: first - began,
    afterLastMs: began + ms - last
  }
}

/** A task's work: `ms` of sleep, recorded as task `index`. */
export const recordedWork = async (recorded: Recorder, index: number, ms: number): Promise<void> => {
  recorded.begin(index)
  await sleep(ms)
  recorded.end(index)
}
