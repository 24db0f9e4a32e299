import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import PQueue from "p-queue"
import { duration } from "../format.ts"
import { cpuColumn, withCpu } from "../lib/cpu.ts"
import { runPool, sleep, timed } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { overFloor, pairedNoWorseThan, ratioAtMost } from "../lib/targets.ts"
import type { Approach, Case, Scenario } from "../types.ts"

interface Params {
  readonly tasks: number
  readonly sleepMs: number
  readonly concurrency: number
}

const indices = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

const pool: Approach<Params> = {
  name: "hand-written pool",
  run: (p) => timed(() => runPool(indices(p.tasks), p.concurrency, () => sleep(p.sleepMs)))
}

const plimit: Approach<Params> = {
  name: "p-limit",
  run: (p) =>
    timed(() => {
      const limit = pLimit(p.concurrency)
      return Promise.all(indices(p.tasks).map(() => limit(() => sleep(p.sleepMs))))
    })
}

const pqueue: Approach<Params> = {
  name: "p-queue",
  run: (p) =>
    timed(() => {
      const queue = new PQueue({ concurrency: p.concurrency })
      return Promise.all(indices(p.tasks).map(() => queue.add(() => sleep(p.sleepMs))))
    })
}

const replayName = "replayed schedule (zero scheduler cost)"

/**
 * The floor: the ideal schedule fixed in advance (task i on slot i mod concurrency), each slot a
 * chain of plain timers, with no queue and no decision at run time.
 */
const replayed: Approach<Params> = {
  name: replayName,
  run: (p) =>
    timed(() =>
      Promise.all(
        indices(Math.min(p.concurrency, p.tasks)).map(async (slot) => {
          for (let i = slot; i < p.tasks; i += p.concurrency) await sleep(p.sleepMs)
        })
      )
    )
}

const forEach: Approach<Params> = {
  name: "Effect.forEach",
  run: (p, { signal }) =>
    timed(() => {
      const work = Effect.forEach(indices(p.tasks), () => Effect.sleep(p.sleepMs), {
        concurrency: p.concurrency,
        discard: true
      })
      return Effect.runPromise(work, { signal })
    })
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return timed(() => {
      const agents = indices(p.tasks).map((i) => Agent.make(`io${i}`, { run: Effect.sleep(p.sleepMs) }))
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const ceilingName = "least-work run with corral's semantics"

/**
 * The least a run with corral's semantics does for these agents (`src/ceilingcore.ts`: the input
 * checked before anything starts, an `Agent.CurrentRef` frame and a fiber per agent, an outcome each,
 * a `RunResult`) written directly over `Effect.forEach`: what any structure of corral's runner
 * could at best reach against `Effect.forEach`.
 */
const ceiling: Approach<Params> = {
  name: ceilingName,
  run: async (p, { signal }) => {
    const { Agent, Corral } = await import("../ceilingcore.ts")
    return timed(() => {
      const agents = indices(p.tasks).map((i) => Agent.make(`io${i}`, { run: Effect.sleep(p.sleepMs) }))
      return Effect.runPromise(Corral.run(agents, { concurrency: p.concurrency }), { signal })
    })
  }
}

const waves = (p: Params): number => Math.ceil(p.tasks / p.concurrency)

const item = (tasks: number, sleepMs: number, concurrency: number): Case<Params> => {
  const params = { tasks, sleepMs, concurrency }
  return {
    label: `${tasks.toLocaleString("en-US")} × ${sleepMs} ms sleep at concurrency ${concurrency}`,
    params,
    boundMs: waves(params) * sleepMs,
    notes: [
      `ideal = ceil(${tasks} / ${concurrency}) × ${sleepMs} ms = ${waves(params) * sleepMs} ms`,
      "CPU: process.cpuUsage() over the run (medians): a wave's timers fire together and run one after another, so the CPU between a timer firing and the next one being set delays the slots restarted later in the wave"
    ]
  }
}

export const ioScaling: Scenario<Params> = {
  name: "io-scaling",
  description:
    "Waiting work (sleeps standing in for LLM calls): does the scheduler keep every slot busy? " +
    "Makespan of the whole batch against the ideal schedule.",
  floor:
    "ideal makespan = ceil(tasks / concurrency) × sleep; ratio = median makespan / ideal. Steady state: every " +
    "repetition runs once right after two full GCs (the 'after GC' column) and once, after all of those and two " +
    "untimed runs, with only two young-generation GCs before it (the median the ratio uses).",
  targets: [
    ratioAtMost("corral ≤ 1.05× at 1,000 × 10 ms / 100", /^1,000 ×/, "corral", 1.05, replayName),
    ratioAtMost("corral ≤ 1.01× at 3 × 100 ms / 3", /^3 ×/, "corral", 1.01, replayName),
    pairedNoWorseThan("corral no worse than Effect.forEach (both cases)", /×/, "corral", "Effect.forEach"),
    pairedNoWorseThan(
      "remaining gap: corral no worse than the least-work run with corral's semantics (both cases)",
      /×/,
      "corral",
      ceilingName
    ),
    pairedNoWorseThan(
      "reach: the least-work run with corral's semantics no worse than Effect.forEach (both cases)",
      /×/,
      ceilingName,
      "Effect.forEach"
    ),
    overFloor(
      "remaining gap: corral ≤ 1.05× / ≤ 1.01× the zero-scheduler-cost replay measured in the same run",
      /×/,
      "corral",
      replayName,
      (label) => (label.startsWith("1,000") ? 1.05 : 1.01)
    )
  ],
  warmup: true,
  steadyState: true,
  reps: 15,
  columns: [{ key: "afterGcMs", label: "after GC", format: duration }, cpuColumn],
  approaches: [replayed, pool, plimit, pqueue, forEach, ceiling, corral].map(withCpu),
  cases: () => [item(1000, 10, 100), item(3, 100, 3)]
}
