/**
 * Agents that run a command: `ProcessRunner.run` wrapped in a core `Agent`, so a process gets the agent's
 * timeout, retries, claims and dependencies from `Corral.run`.
 *
 * @since 0.1.0
 */
import * as Agent from "@corral/core/Agent"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as ProcessRunner from "./ProcessRunner.ts"

/**
 * The fields of a `ProcessSpec` plus the agent options (`timeout`, `retry`, `claims`, `dependsOn`, `labels`, ...).
 * The process `name` defaults to the agent id.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = ProcessRunner.ProcessSpec &
  Omit<
    Agent.Options<ProcessRunner.ProcessResult, ProcessRunner.ProcessFailed, ChildProcessSpawner.ChildProcessSpawner>,
    "run"
  >

/**
 * An agent whose work is a process.
 *
 * @since 0.1.0
 * @category models
 */
export type ProcessAgent<Id extends string = string> = Agent.Agent<
  ProcessRunner.ProcessResult,
  ProcessRunner.ProcessFailed,
  ChildProcessSpawner.ChildProcessSpawner,
  Id
>

const resultsOf = (deps: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const results: Record<string, unknown> = {}
  for (const [id, value] of Object.entries(deps)) {
    const result = (value as Partial<ProcessRunner.ProcessResult> | undefined)?.result
    if (result !== undefined) results[id] = result
  }
  return results
}

/**
 * Defines an agent that runs a command. A timeout or interruption kills the whole process tree; a crash or
 * an exceeded limit fails only this agent, with `ProcessFailed`. Ctrl-C and SIGTERM of a program run with
 * `NodeRuntime.runMain` interrupt the run, so they kill it too; a SIGKILL of your process runs no
 * cleanup, and the command keeps running on its own unless you pass `dieWith: process.pid`.
 *
 * The command finds three paths in its environment: `CORRAL_USAGE_FILE` (append JSON lines such as
 * `{"inputTokens":1200,"outputTokens":300,"costUsd":0.004}`; they become this agent's usage as they are
 * written), `CORRAL_RESULT_FILE` (JSON written there becomes `ProcessResult.result`) and, for an agent
 * with `dependsOn`, `CORRAL_DEPS_DIR` (`<dependency-id>.json` holding each dependency's result).
 *
 * @example
 * ```ts
 * import { Corral } from "@corral/core"
 * import { ProcessAgent } from "@corral/platform-node"
 * import { NodeServices } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * const build = ProcessAgent.make("build", { command: "pnpm", args: ["build"] })
 * const test = ProcessAgent.make("test", {
 *   command: "pnpm",
 *   args: ["test"],
 *   logDir: ".corral/logs",
 *   limits: { memoryMb: 4096, cpuPercent: 50, diskMb: 2048 },
 *   sandbox: { network: false },
 *   timeout: "15 minutes",
 *   dependsOn: ["build"]
 * })
 * Corral.run([build, test]).pipe(Effect.provide(NodeServices.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const Id extends string>(id: Id, options: Options): ProcessAgent<Id> => {
  const { timeout, retry, claims, claimTimeout, dependsOn, estimate, rateLimit, idempotencyKey, labels, ...spec } =
    options
  return Agent.make(id, {
    run: (deps: Readonly<Record<string, unknown>>) =>
      ProcessRunner.run({ name: id, ...spec, ...(dependsOn === undefined ? {} : { deps: resultsOf(deps) }) }),
    timeout,
    retry,
    claims,
    claimTimeout,
    dependsOn,
    estimate,
    rateLimit,
    idempotencyKey,
    labels
  })
}
