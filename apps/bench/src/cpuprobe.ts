/**
 * CPU per process agent, for A/B comparisons in alternating processes on a loaded machine:
 * `node src/cpuprobe.ts N "command args" [warm-up N]` runs a warm-up run, then N agents at
 * concurrency 8, and prints this process's CPU (`process.cpuUsage()`), the tree's (with the reaped
 * and the live children: the spawn helper) and wall time, per agent. `CORRAL_SPAWN_HELPER=0` starts
 * the agents without the helper.
 */
import * as ProcessAgent from "@corral/platform-node/ProcessAgent"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import { Corral } from "@corral/core"
import { childrenCpuMs, liveChildrenCpuMs } from "./lib/cpu.ts"

const n = Number(process.argv[2] ?? 300)
const [command = "true", ...args] = (process.argv[3] ?? "true").split(" ")
const warm = Number(process.argv[4] ?? 50)
const once = async (count: number) => {
  const agents = Array.from({ length: count }, (_, i) => ProcessAgent.make(`a-${i}`, { command, args }))
  const result = await Effect.runPromise(
    Corral.run(agents, { concurrency: 8 }).pipe(Effect.provide(NodeServices.layer))
  )
  if (!result.allSucceeded) throw new Error(`failed ${result.failed.length}`)
}
await once(warm)
const c0 = (childrenCpuMs() ?? 0) + liveChildrenCpuMs()
const u0 = process.cpuUsage()
const t0 = performance.now()
await once(n)
const u = process.cpuUsage(u0)
const c = (childrenCpuMs() ?? 0) + liveChildrenCpuMs() - c0
console.log(
  JSON.stringify({
    cpuMsPerAgent: (u.user + u.system) / 1000 / n,
    treeMsPerAgent: ((u.user + u.system) / 1000 + c) / n,
    wallMsPerAgent: (performance.now() - t0) / n,
    rssMb: process.memoryUsage().rss / 2 ** 20
  })
)
process.exit(0)
