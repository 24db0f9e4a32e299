import { spawn as spawnChild } from "node:child_process"
import { perProcessColumns, timedPerProcess } from "../lib/cpu.ts"
import * as ProcessAgent from "@corral/platform-node/ProcessAgent"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import { core } from "../lib/core.ts"
import { freshPool } from "../lib/freshPool.ts"
import { ratioAtMost } from "../lib/targets.ts"
import type { Approach, Scenario } from "../types.ts"

interface Params {
  readonly processes: number
  readonly concurrency: number
}

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
  name: "child_process.spawn pool, fresh process",
  run: async (p) => {
    const { ms, ownMs, childrenMs } = await freshPool(p.processes, p.concurrency, ["true"])
    return {
      ms,
      metrics: { cpuMsPerProcess: ownMs / p.processes, treeCpuMsPerProcess: (ownMs + childrenMs) / p.processes }
    }
  }
}

const corral: Approach<Params> = {
  name: "corral ProcessAgent",
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

export const spawn: Scenario<Params> = {
  name: "spawn",
  description: "process agents: spawn, watch and reap 200 runs of `true` at concurrency 8",
  floor:
    "a plain child_process.spawn loop with the same concurrency in a fresh Node.js process (timed inside it), measured in the same run; the same loop inside the bench process, which a full run has grown large, is a reference row",
  targets: [ratioAtMost("corral ≤ 1.2× the plain spawn loop", /true at/, "corral ProcessAgent", 1.2)],
  floorApproach: "child_process.spawn pool, fresh process",
  columns: perProcessColumns,
  approaches: [freshSpawn, plainSpawn, corral],
  cases: (options) => [
    {
      label: `${options.quick ? 50 : 200} × true at concurrency 8`,
      params: { processes: options.quick ? 50 : 200, concurrency: 8 }
    }
  ]
}
