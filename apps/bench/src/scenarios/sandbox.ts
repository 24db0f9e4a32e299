import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ProcessAgent from "@corral/platform-node/ProcessAgent"
import type * as ProcessRunner from "@corral/platform-node/ProcessRunner"
import * as Sandbox from "@corral/platform-node/Sandbox"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import { perProcessColumns, timedPerProcess } from "../lib/cpu.ts"
import { core } from "../lib/core.ts"
import { ratioAtMost } from "../lib/targets.ts"
import type { Approach, Scenario } from "../types.ts"

interface Params {
  readonly processes: number
  readonly concurrency: number
}

const agents = (name: string, sandbox: ProcessRunner.ProcessSpec["sandbox"]): Approach<Params> => ({
  name,
  run: async (p) => {
    const { Corral } = await core()
    const cwd = mkdtempSync(join(tmpdir(), "corral-bench-sandbox-"))
    return timedPerProcess(p.processes, async () => {
      const list = Array.from({ length: p.processes }, (_, i) =>
        ProcessAgent.make(`true-${i}`, { command: "true", cwd, ...(sandbox === undefined ? {} : { sandbox }) })
      )
      const result = await Effect.runPromise(
        Corral.run(list, { concurrency: p.concurrency }).pipe(Effect.provide(NodeServices.layer))
      )
      if (!result.allSucceeded) throw new Error(`${result.failed.length} process agents failed`)
    })
  }
})

const support = Sandbox.supportUnsafe()

export const sandbox: Scenario<Params> = {
  name: "sandbox",
  description: `start-up cost of sandboxed process agents (bubblewrap): 200 runs of \`true\` at concurrency 8 (${support.detail})`,
  floor: "the same process agents without a sandbox, measured in the same run",
  targets: [ratioAtMost("sandbox: true ≤ 1.3× unsandboxed", /true at/, "ProcessAgent, sandbox: true", 1.3)],
  floorApproach: "ProcessAgent, no sandbox",
  columns: perProcessColumns,
  approaches: support.available
    ? [
        agents("ProcessAgent, no sandbox", undefined),
        agents("ProcessAgent, sandbox: true", true),
        agents("ProcessAgent, sandbox network: false", { network: false })
      ]
    : [agents("ProcessAgent, no sandbox", undefined)],
  cases: (options) => [
    {
      label: `${options.quick ? 50 : 200} × true at concurrency 8`,
      params: { processes: options.quick ? 50 : 200, concurrency: 8 }
    }
  ]
}
