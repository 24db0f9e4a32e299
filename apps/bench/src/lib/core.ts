import type * as Core from "@corral/core"
import * as Effect from "effect/Effect"

type CoreModule = typeof Core
type AnyAgent = Core.Agent.Agent<unknown, unknown, never>

let loaded: Promise<CoreModule> | undefined
let module: CoreModule | undefined

/** `@corral/core`, or the copy of its `src/index.ts` that `CORRAL_CORE` names (A/B of two versions in alternating processes). */
export const core = (): Promise<CoreModule> =>
  (loaded ??= import(process.env.CORRAL_CORE ?? "@corral/core").then((loadedModule: CoreModule) => {
    module = loadedModule
    return loadedModule
  }))

const describeFailures = (result: Core.RunResult.RunResult): string => {
  const first = result.failed[0]
  const counts = Object.entries(result.counts)
    .map(([tag, n]) => `${tag} ${n}`)
    .join(", ")
  return `not every agent succeeded (${counts})${first ? `; first: ${first.agentId} ${first._tag}` : ""}`
}

/**
 * Runs the agents and fails unless every one succeeded. The caller has loaded the core (`core()`,
 * to make the agents): the run starts in the caller's own step and its check runs inside the run's
 * effect, so a timed corral run has no promise hop before it starts or after it ends that
 * `Effect.runPromise` of the peers has not.
 */
export const runAgents = (
  agents: ReadonlyArray<AnyAgent>,
  options: Core.Corral.Options,
  signal: AbortSignal
): Promise<Core.RunResult.RunResult> => {
  if (module === undefined) throw new Error("runAgents before core() loaded the core")
  const checked = Effect.flatMap(module.Corral.run(agents, options), (result) =>
    result.allSucceeded ? Effect.succeed(result) : Effect.die(new Error(describeFailures(result)))
  )
  return Effect.runPromise(checked, { signal })
}
