/**
 * Synchronous, CPU-bound functions as agents: each call runs in its own `node:worker_threads`
 * worker with optional `resourceLimits`, so it neither blocks the event loop nor takes the other
 * agents down when it exhausts its memory. Interrupting the agent (timeout, fail-fast, Ctrl-C)
 * terminates the worker.
 *
 * @since 0.1.0
 */
import * as Agent from "@corral/core/Agent"
import { type BlockingFailed, runInWorker, type Spec } from "./internal/blockingRun.ts"

export { BlockingFailed, type ResourceLimits, type Spec } from "./internal/blockingError.ts"

/**
 * A spec plus the agent options (`timeout`, `retry`, `claims`, `dependsOn`, ...).
 *
 * @since 0.1.0
 * @category models
 */
export type Options = Spec & Omit<Agent.Options<unknown, BlockingFailed, never>, "run">

/**
 * Defines an agent that runs a synchronous function in a worker thread.
 *
 * @example
 * ```ts
 * import * as Blocking from "@corral/platform-node/Blocking"
 *
 * const hash = Blocking.agent("hash-files", {
 *   module: new URL("./hash.ts", import.meta.url),
 *   export: "hashAll",
 *   input: { files: ["a.bin", "b.bin"] },
 *   resourceLimits: { maxOldGenerationSizeMb: 256 },
 *   timeout: "2 minutes"
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const agent = <const Id extends string>(
  id: Id,
  options: Options
): Agent.Agent<unknown, BlockingFailed, never, Id> => {
  const { module, export: name, input, resourceLimits, ...agentOptions } = options
  return Agent.make(id, { ...agentOptions, run: run({ module, export: name, input, resourceLimits }) })
}

/**
 * Runs a synchronous function in a worker thread, as an effect.
 *
 * @since 0.1.0
 * @category running
 */
export const run = runInWorker
