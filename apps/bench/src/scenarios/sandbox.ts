import * as ProcessAgent from "@corral/platform-node/ProcessAgent"
import type * as ProcessRunner from "@corral/platform-node/ProcessRunner"
import * as Sandbox from "@corral/platform-node/Sandbox"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import { perProcessColumns, timedPerProcess } from "../lib/cpu.ts"
import { core } from "../lib/core.ts"
import { freshPool } from "../lib/freshPool.ts"
import { ratioAtMost } from "../lib/targets.ts"
import { withTempDir } from "../lib/tempDir.ts"
import type { Approach, CaseResult, Scenario, Target } from "../types.ts"
import { makePlan } from "../../../../packages/platform-node/src/internal/processPlan.ts"

interface Params {
  readonly processes: number
  readonly concurrency: number
}

const agents = (name: string, sandbox: ProcessRunner.ProcessSpec["sandbox"]): Approach<Params> => ({
  name,
  run: async (p) => {
    const { Corral } = await core()
    return withTempDir("corral-bench-sandbox-", (cwd) =>
      timedPerProcess(p.processes, async () => {
        const list = Array.from({ length: p.processes }, (_, i) =>
          ProcessAgent.make(`true-${i}`, { command: "true", cwd, ...(sandbox === undefined ? {} : { sandbox }) })
        )
        const result = await Effect.runPromise(
          Corral.run(list, { concurrency: p.concurrency }).pipe(Effect.provide(NodeServices.layer))
        )
        if (!result.allSucceeded) throw new Error(`${result.failed.length} process agents failed`)
      })
    )
  }
})

/**
 * The command line corral runs for a sandboxed `true` (bubblewrap, its flags and mounts, the shell it
 * runs as process 1), from corral's own process plan: the protocol folder is bound as a private folder,
 * as a run does.
 */
const sandboxedArgv = (cwd: string, privateDir: string): ReadonlyArray<string> => {
  const planned = makePlan({ command: "true", cwd, sandbox: true, privateDirs: [privateDir] })
  if (planned._tag === "Invalid") throw new Error(planned.detail)
  return planned.plan.argv
}

/**
 * A plain spawn pool of `argv` in a fresh Node.js process (`lib/freshPool.ts`); `argv` is given the
 * pool's working folder and a protocol folder, both removed when the pool ends.
 */
const pool = (name: string, argv: (cwd: string, privateDir: string) => ReadonlyArray<string>): Approach<Params> => ({
  name,
  run: (p) =>
    withTempDir("corral-bench-sandbox-", (cwd) =>
      withTempDir("corral-bench-sandbox-protocol-", async (privateDir) => {
        const { ms, ownMs, childrenMs } = await freshPool(p.processes, p.concurrency, argv(cwd, privateDir), cwd)
        return {
          ms,
          metrics: { cpuMsPerProcess: ownMs / p.processes, treeCpuMsPerProcess: (ownMs + childrenMs) / p.processes }
        }
      })
    )
})

const NO_SANDBOX = "ProcessAgent, no sandbox"
const SANDBOX = "ProcessAgent, sandbox: true"
const POOL_TRUE = "plain spawn pool of true, fresh process (reference)"
const POOL_BWRAP = "plain spawn pool of corral's bwrap command for true, fresh process (reference)"
const POOL_BWRAP_LEAST = "plain spawn pool of bwrap --ro-bind / / true, fresh process (reference)"

const medianOf = (item: CaseResult, name: string): number | undefined =>
  item.approaches.find((a) => a.name === name && a.error === undefined)?.medianMs

/**
 * Reported, no target: what bubblewrap's own start costs without corral (the two plain pools), and
 * what a sandbox adds to a corral agent on top of that, per process.
 */
const bubblewrapFloor: Target = {
  label:
    "sandbox: bubblewrap's own start (plain pools: corral's bwrap command vs true) and what corral's sandbox adds over it",
  evaluate: (cases) => {
    const item = cases.find((c) => /true at/.test(c.label))
    if (item === undefined) return undefined
    const [plain, sandboxed, poolTrue, poolBwrap, poolLeast] = [
      NO_SANDBOX,
      SANDBOX,
      POOL_TRUE,
      POOL_BWRAP,
      POOL_BWRAP_LEAST
    ].map((name) => medianOf(item, name))
    if ([plain, sandboxed, poolTrue, poolBwrap, poolLeast].some((ms) => ms === undefined)) return undefined
    const processes = Number(/^(\d+)/.exec(item.label)?.[1] ?? "1")
    const perProcess = (ms: number) => `${(ms / processes).toFixed(2)} ms`
    const bwrapExtra = poolBwrap! - poolTrue!
    const sandboxExtra = sandboxed! - plain!
    return {
      figure:
        `bwrap pool ${(poolBwrap! / poolTrue!).toFixed(2)}× the true pool (+${perProcess(bwrapExtra)} per process; ` +
        `the least bwrap ${(poolLeast! / poolTrue!).toFixed(2)}×, +${perProcess(poolLeast! - poolTrue!)}); ` +
        `corral's sandbox adds +${perProcess(sandboxExtra)} per process (${(sandboxExtra / bwrapExtra).toFixed(2)}× bubblewrap's own); ` +
        `1.3× would need the sandbox to add at most ${perProcess(0.3 * plain!)}`,
      met: undefined
    }
  }
}

const support = Sandbox.supportUnsafe()

export const sandbox: Scenario<Params> = {
  name: "sandbox",
  description: `start-up cost of sandboxed process agents (bubblewrap): 200 runs of \`true\` at concurrency 8 (${support.detail})`,
  floor:
    "the same process agents without a sandbox, measured in the same run; bubblewrap's own start is measured too: a plain spawn pool of corral's bwrap command line for true against one of true, and the least bubblewrap can do (bwrap --ro-bind / / true), each in a fresh Node.js process",
  targets: [ratioAtMost("sandbox: true ≤ 1.3× unsandboxed", /true at/, SANDBOX, 1.3), bubblewrapFloor],
  floorApproach: NO_SANDBOX,
  columns: perProcessColumns,
  approaches: support.available
    ? [
        agents(NO_SANDBOX, undefined),
        agents(SANDBOX, true),
        agents("ProcessAgent, sandbox network: false", { network: false }),
        pool(POOL_TRUE, () => ["true"]),
        pool(POOL_BWRAP, sandboxedArgv),
        pool(POOL_BWRAP_LEAST, () => [support.bwrap!, "--ro-bind", "/", "/", "true"])
      ]
    : [agents(NO_SANDBOX, undefined)],
  cases: (options) => [
    {
      label: `${options.quick ? 50 : 200} × true at concurrency 8`,
      params: { processes: options.quick ? 50 : 200, concurrency: 8 }
    }
  ]
}
