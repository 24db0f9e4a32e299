/**
 * A floor measured from real timers alone, in the same run as the approaches it bounds: tasks that
 * must follow each other (the holders of one key) run in sequence in any valid schedule, so no
 * scheduler in this process runs them faster than the same chain with nothing else on the event
 * loop, each timer set as soon as the previous one fired. The work ÷ concurrency term is measured
 * the same way: the tasks on `slots` chains at once. Each task is `recordedWork`, the sleep (a
 * `setTimeout`) and timestamps every approach's tasks use.
 */
import type { Sample } from "../types.ts"
import { type Recorder, recordedWork, recorder } from "./schedule.ts"

const positiveInteger = (name: string, value: number): void => {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`timer floor: ${name} must be a positive integer, got ${value}`)
}

/** Wall time of `links` tasks of `ms`, each started as soon as the previous one ended. */
export const chainMs = async (links: number, ms: number, recorded: Recorder = recorder(links)): Promise<number> => {
  positiveInteger("links", links)
  const start = performance.now()
  for (let i = 0; i < links; i++) await recordedWork(recorded, i, ms)
  return performance.now() - start
}

/** Wall time of `tasks` tasks of `ms` on `slots` chains at once (task `i` on chain `i mod slots`). */
export const spreadMs = async (
  tasks: number,
  ms: number,
  slots: number,
  recorded: Recorder = recorder(tasks)
): Promise<number> => {
  positiveInteger("tasks", tasks)
  positiveInteger("slots", slots)
  const start = performance.now()
  await Promise.all(
    Array.from({ length: Math.min(slots, tasks) }, async (_, slot) => {
      for (let i = slot; i < tasks; i += slots) await recordedWork(recorded, i, ms)
    })
  )
  return performance.now() - start
}

/**
 * The floor of a batch of `tasks` tasks of `ms` at concurrency `slots` whose longest chain of tasks
 * that must follow each other is `links` long: the chain alone, then the spread alone, and the
 * larger of the two as the sample.
 */
export const timerFloor = async (
  links: number,
  tasks: number,
  ms: number,
  slots: number
): Promise<Sample & { readonly metrics: { readonly chainMs: number; readonly spreadMs: number } }> => {
  const chain = await chainMs(links, ms)
  const spread = await spreadMs(tasks, ms, slots)
  return { ms: Math.max(chain, spread), metrics: { chainMs: chain, spreadMs: spread } }
}
