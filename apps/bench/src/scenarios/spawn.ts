import { spawn as spawnChild } from "node:child_process"
import { perProcessColumns, timedPerProcess } from "../lib/cpu.ts"
import * as ProcessAgent from "@corral/platform-node/ProcessAgent"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import { core } from "../lib/core.ts"
import { freshPool } from "../lib/freshPool.ts"
import { freshSupervisor } from "../lib/freshSupervisor.ts"
import { ratioAtMost } from "../lib/targets.ts"
import type { Approach, CaseResult, Scenario, Target } from "../types.ts"

interface Params {
  readonly processes: number
  readonly concurrency: number
}

const POOL = "child_process.spawn pool, fresh process"
const SUPERVISOR = "spawn helper and /proc watchdog without effect, fresh process (reference)"
const CORRAL = "corral ProcessAgent"

const runTrue = () =>
  new Promise<void>((resolve, reject) => {
    const child = spawnChild("true", [], { stdio: ["ignore", "pipe", "pipe"], detached: true })
    child.on("error", reject)
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`true exited with ${code}`))))
  })

const plainSpawn: Approach<Params> = {
  name: "child_process.spawn pool, in the bench process (reference)",
  run: (p) =>
    timedPerProcess(p.processes, async () => {
      let next = 0
      const worker = async () => {
        while (next < p.processes) {
          next++
          await runTrue()
        }
      }
      await Promise.all(Array.from({ length: p.concurrency }, worker))
    })
}

/**
 * The same pool in a fresh Node.js process of its own (`lib/freshPool.ts`), timed inside it (its start-up excluded).
 * Node's `spawn()` forks the caller, so its cost grows with the caller's memory: by the time this
 * scenario runs in a full `pnpm bench`, the bench process has built millions of agents and the
 * in-process pool pays for its size. A small script is what a user would compare with.
 */
const freshSpawn: Approach<Params> = {
  name: POOL,
  run: async (p) => {
    const { ms, ownMs, childrenMs } = await freshPool(p.processes, p.concurrency, ["true"])
    return {
      ms,
      metrics: { cpuMsPerProcess: ownMs / p.processes, treeCpuMsPerProcess: (ownMs + childrenMs) / p.processes }
    }
  }
}

/**
 * What corral's design costs without corral (`lib/freshSupervisor.ts`): the fresh pool, each process
 * started through corral's spawn helper and watched with corral's /proc reads, no effect.
 */
const supervisorFloor: Approach<Params> = {
  name: SUPERVISOR,
  run: async (p) => {
    const { ms, ownMs, childrenMs } = await freshSupervisor(p.processes, p.concurrency, ["true"])
    return {
      ms,
      metrics: { cpuMsPerProcess: ownMs / p.processes, treeCpuMsPerProcess: (ownMs + childrenMs) / p.processes }
    }
  }
}

const corral: Approach<Params> = {
  name: CORRAL,
  run: async (p) => {
    const { Corral } = await core()
    return timedPerProcess(p.processes, async () => {
      const agents = Array.from({ length: p.processes }, (_, i) => ProcessAgent.make(`true-${i}`, { command: "true" }))
      const result = await Effect.runPromise(
        Corral.run(agents, { concurrency: p.concurrency }).pipe(Effect.provide(NodeServices.layer))
      )
      if (!result.allSucceeded) throw new Error(`${result.failed.length} process agents failed`)
    })
  }
}

const resultOf = (item: CaseResult, name: string) =>
  item.approaches.find((a) => a.name === name && a.error === undefined)

/**
 * Reported, no target: how far the least a helper-and-/proc supervisor does is from the plain pool,
 * and what corral adds over that, per process (wall time and the tree's CPU).
 */
const supervisorGap: Target = {
  label:
    "spawn: corral's spawn helper and /proc watchdog without effect (the design's floor) and what corral adds over it",
  evaluate: (cases) => {
    const item = cases.find((c) => /true at/.test(c.label))
    if (item === undefined) return undefined
    const [pool, floor, ours] = [POOL, SUPERVISOR, CORRAL].map((name) => resultOf(item, name))
    if (pool?.medianMs === undefined || floor?.medianMs === undefined || ours?.medianMs === undefined) return undefined
    const processes = Number(/^(\d+)/.exec(item.label)?.[1] ?? "1")
    const perProcess = (ms: number) => `${ms >= 0 ? "+" : ""}${(ms / processes).toFixed(2)} ms`
    const tree = (result: typeof pool) => (result.metrics.treeCpuMsPerProcess ?? Number.NaN).toFixed(2)
    const room = 1.2 * pool.medianMs - floor.medianMs
    return {
      figure:
        `floor ${(floor.medianMs / pool.medianMs).toFixed(2)}× the plain pool (${perProcess(floor.medianMs - pool.medianMs)} per process); ` +
        `corral ${perProcess(ours.medianMs - floor.medianMs)} per process over the floor; ` +
        `tree CPU per process: pool ${tree(pool)}, floor ${tree(floor)}, corral ${tree(ours)} ms; ` +
        (room > 0
          ? `1.2× would need corral to add at most ${perProcess(room)} per process over the floor`
          : "the floor alone is above 1.2×"),
      met: undefined
    }
  }
}

export const spawn: Scenario<Params> = {
  name: "spawn",
  description: "process agents: spawn, watch and reap 200 runs of `true` at concurrency 8",
  floor:
    "a plain child_process.spawn loop with the same concurrency in a fresh Node.js process (timed inside it), measured in the same run; the same loop inside the bench process, which a full run has grown large, is a reference row; so is the loop started through corral's spawn helper and watched with corral's /proc reads, without effect (the least corral's design does)",
  targets: [ratioAtMost("corral ≤ 1.2× the plain spawn loop", /true at/, CORRAL, 1.2), supervisorGap],
  floorApproach: POOL,
  columns: perProcessColumns,
  approaches: [freshSpawn, supervisorFloor, plainSpawn, corral],
  cases: (options) => [
    {
      label: `${options.quick ? 50 : 200} × true at concurrency 8`,
      params: { processes: options.quick ? 50 : 200, concurrency: 8 }
    }
  ]
}
