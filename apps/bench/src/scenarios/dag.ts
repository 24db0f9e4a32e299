import * as Effect from "effect/Effect"
import { runPool, sleep, timed } from "../lib/async.ts"
import { core, runAgents } from "../lib/core.ts"
import { type DagNode, levels, randomDag, remainingPath } from "../lib/workload.ts"
import type { Approach, Case, Scenario } from "../types.ts"

interface Params {
  readonly nodes: ReadonlyArray<DagNode>
  readonly concurrency: number
}

const byLevel: Approach<Params> = {
  name: "level by level",
  run: (p) =>
    timed(async () => {
      for (const level of levels(p.nodes)) await runPool(level, p.concurrency, (node) => sleep(node.ms))
    })
}

type Pick = (ready: Array<DagNode>) => DagNode

const greedy = (p: Params, pick: Pick): Promise<void> =>
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
        sleep(node.ms).then(() => finish(node))
      }
    }
    fill()
  })

const fifo: Approach<Params> = {
  name: "first-ready FIFO greedy",
  run: (p) => timed(() => greedy(p, (ready) => ready.shift()!))
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
  run: (p) => timed(() => greedy(p, longestFirst(p)))
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    return timed(() => {
      const agents = p.nodes.map((node) =>
        Agent.make(node.id, {
          run: Effect.sleep(node.ms),
          dependsOn: node.deps.map((dep) => p.nodes[dep]!.id),
          estimate: node.ms
        })
      )
      return runAgents(agents, { concurrency: p.concurrency }, signal)
    })
  }
}

const item = (): Case<Params> => {
  const nodes = randomDag(11, 500)
  const critical = Math.max(...remainingPath(nodes))
  const total = nodes.reduce((sum, node) => sum + node.ms, 0)
  const spread = total / 16
  return {
    label: `500 nodes (seed 11), ${levels(nodes).length} levels, total work ${total} ms, concurrency 16`,
    params: { nodes, concurrency: 16 },
    boundMs: Math.max(critical, spread),
    notes: [`bound = max(critical path ${critical} ms, total work / 16 = ${spread.toFixed(1)} ms)`]
  }
}

export const dag: Scenario<Params> = {
  name: "dag",
  description:
    "Agents with dependencies (plan → edit → test chains): a random DAG of 500 nodes, each 0–3 " +
    "dependencies on earlier nodes and 1–20 ms of real sleep. Do fast branches wait for slow ones?",
  floor: "lower bound = max(critical path, total work / concurrency); ratio = median / bound",
  targets: ["corral ≤ 1.02× the bound"],
  approaches: [byLevel, fifo, criticalFirst, corral],
  cases: () => [item()]
}
