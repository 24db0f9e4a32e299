import * as Effect from "effect/Effect"
import { duration } from "../format.ts"
import { cpuColumn, withCpu } from "../lib/cpu.ts"
import { runPool } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { checkDependencies, type Recorder, recordedWork, timedAndChecked, timeSplit } from "../lib/schedule.ts"
import { dagPlan, perCase, replay } from "../lib/replay.ts"
import { noWorseThan, overFloor, ratioAtMost } from "../lib/targets.ts"
import { type DagNode, levels, randomDag, remainingPath } from "../lib/workload.ts"
import type { Approach, Case, Sample, Scenario } from "../types.ts"

interface Params {
  readonly nodes: ReadonlyArray<DagNode>
  readonly concurrency: number
}

/** Times `body`, which records each node's work, then checks every node started after its dependencies ended. */
const checked = async (p: Params, body: (recorded: Recorder) => Promise<unknown>): Promise<Sample> => {
  let recorded: Recorder | undefined
  let began = 0
  const sample = await timedAndChecked(
    p.nodes.length,
    (r) => {
      recorded = r
      began = performance.now()
      return body(r)
    },
    (r) =>
      checkDependencies(
        r,
        p.nodes.map((node) => node.deps)
      )
  )
  return {
    ...sample,
    metrics: timeSplit(
      recorded!,
      p.nodes.map((node) => node.ms),
      p.concurrency,
      began,
      sample.ms
    )
  }
}

const work = (recorded: Recorder, node: DagNode): Promise<void> => recordedWork(recorded, node.index, node.ms)

const byLevel: Approach<Params> = {
  name: "level by level",
  run: (p) =>
    checked(p, async (recorded) => {
      for (const level of levels(p.nodes)) await runPool(level, p.concurrency, (node) => work(recorded, node))
    })
}

type Pick = (ready: Array<DagNode>) => DagNode

const greedy = (p: Params, pick: Pick, recorded: Recorder): Promise<void> =>
  new Promise((resolve) => {
    const waiting = p.nodes.map((node) => node.deps.length)
    const dependents = p.nodes.map(() => [] as Array<DagNode>)
    for (const node of p.nodes) for (const dep of node.deps) dependents[dep]!.push(node)
    const ready = p.nodes.filter((node) => node.deps.length === 0)
    let running = 0
    let done = 0
    const finish = (node: DagNode) => {
      running--
      done++
      for (const next of dependents[node.index]!) if (--waiting[next.index]! === 0) ready.push(next)
      if (done === p.nodes.length) resolve()
      else fill()
    }
    const fill = () => {
      while (running < p.concurrency && ready.length > 0) {
        const node = pick(ready)
        running++
        work(recorded, node).then(() => finish(node))
      }
    }
    fill()
  })

const fifo: Approach<Params> = {
  name: "first-ready FIFO greedy",
  run: (p) => checked(p, (recorded) => greedy(p, (ready) => ready.shift()!, recorded))
}

const longestFirst = (p: Params): Pick => {
  const remaining = remainingPath(p.nodes)
  return (ready) => {
    let best = 0
    for (let i = 1; i < ready.length; i++) if (remaining[ready[i]!.index]! > remaining[ready[best]!.index]!) best = i
    return ready.splice(best, 1)[0]!
  }
}

const criticalFirst: Approach<Params> = {
  name: "longest-path-first greedy (reference)",
  run: (p) => checked(p, (recorded) => greedy(p, longestFirst(p), recorded))
}

const replayName = "replayed schedule (zero scheduler cost)"

const planOf = perCase((p: Params) => {
  const durations = p.nodes.map((node) => node.ms)
  const plan = dagPlan(
    p.nodes.map((node) => node.deps),
    durations,
    remainingPath(p.nodes),
    p.concurrency
  )
  return { plan, durations }
})

/**
 * The floor: the longest-path-first schedule, decided in virtual time once per case (when the case is
 * made), replayed with plain timers (see `replay.ts`).
 */
const replayed: Approach<Params> = {
  name: replayName,
  run: (p) => {
    const { plan, durations } = planOf(p)
    return checked(p, (recorded) => replay(plan, durations, recorded))
  }
}

const corralApproach = (name: string, estimates: boolean): Approach<Params> => ({
  name,
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return checked(p, (recorded) => {
      const agents = p.nodes.map((node) =>
        Agent.make(node.id, {
          run: Effect.suspend(() => {
            recorded.begin(node.index)
            return Effect.sleep(node.ms)
          }).pipe(Effect.tap(() => Effect.sync(() => recorded.end(node.index)))),
          dependsOn: node.deps.map((dep) => p.nodes[dep]!.id),
          ...(estimates ? { estimate: node.ms } : {})
        })
      )
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
})

const item = (): Case<Params> => {
  const nodes = randomDag(11, 500)
  const critical = Math.max(...remainingPath(nodes))
  const total = nodes.reduce((sum, node) => sum + node.ms, 0)
  const spread = total / 16
  const params = { nodes, concurrency: 16 }
  const virtual = planOf(params).plan.makespanMs
  return {
    label: `500 nodes (seed 11), ${levels(nodes).length} levels, total work ${total} ms, concurrency 16`,
    params,
    boundMs: Math.max(critical, spread),
    notes: [
      `bound = max(critical path ${critical} ms, total work / 16 = ${spread.toFixed(1)} ms)`,
      "corral (estimates) is given each node's exact duration as `estimate`; corral (no estimates) and the peers get nothing",
      `longest-path-first in virtual time (exact durations, no CPU) takes ${virtual} ms = ${(virtual / Math.max(critical, spread)).toFixed(2)}× the bound; "${replayName}" replays that schedule with plain timers and no decisions (the floor for any scheduler here)`,
      "every approach's schedule is checked from the nodes' own timestamps: a node starting before a dependency ended fails it",
      "late: the nodes' sleeps over their durations, summed ÷ 16 (timers firing late); idle: makespan − the nodes' summed run time ÷ 16 (hand-offs and the tail); the work bound binds, so makespan = bound + late + idle",
      "CPU: process.cpuUsage() over the run and its schedule check (medians)"
    ]
  }
}

const anyCase = /nodes/

export const dag: Scenario<Params> = {
  name: "dag",
  description:
    "Agents with dependencies (plan → edit → test chains): a random DAG of 500 nodes, each 0–3 " +
    "dependencies on earlier nodes and 1–20 ms of real sleep. Do fast branches wait for slow ones?",
  floor:
    "lower bound = max(critical path, total work / concurrency); ratio = median / bound. Steady state: every " +
    "repetition runs once right after two full GCs (the 'after GC' column) and once, after all of those and two " +
    "untimed runs, with only two young-generation GCs before it (the median the ratio uses).",
  targets: [
    ratioAtMost("corral with estimates ≤ 1.02× the bound", anyCase, "corral (estimates)", 1.02, replayName),
    overFloor(
      "remaining gap: corral with estimates ≤ 1.02× the zero-scheduler-cost replay measured in the same run",
      anyCase,
      "corral (estimates)",
      replayName,
      1.02
    ),
    noWorseThan(
      "corral without estimates no worse than FIFO greedy",
      anyCase,
      "corral (no estimates)",
      "first-ready FIFO greedy"
    )
  ],
  steadyState: true,
  reps: 9,
  columns: [
    { key: "afterGcMs", label: "after GC", format: duration },
    { key: "lateMs", label: "late", format: duration },
    { key: "idleMs", label: "idle", format: duration },
    { key: "firstMs", label: "1st start", format: duration },
    { key: "afterLastMs", label: "after last", format: duration },
    cpuColumn
  ],
  approaches: [
    byLevel,
    fifo,
    criticalFirst,
    replayed,
    corralApproach("corral (estimates)", true),
    corralApproach("corral (no estimates)", false)
  ].map(withCpu),
  cases: () => [item()]
}
