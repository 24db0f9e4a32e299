import type * as Core from "@corral/core"
import * as Effect from "effect/Effect"

type CoreModule = typeof Core
type AnyAgent = Core.Agent.Agent<unknown, unknown, never>

let loaded: Promise<CoreModule> | undefined

/** `@corral/core`, or the copy of its `src/index.ts` that `CORRAL_CORE` names (A/B of two versions in alternating processes). */
export const core = (): Promise<CoreModule> => (loaded ??= import(process.env.CORRAL_CORE ?? "@corral/core"))

const describeFailures = (result: Core.RunResult.RunResult): string => {
  const first = result.failed[0]
  const counts = Object.entries(result.counts)
    .map(([tag, n]) => `${tag} ${n}`)
    .join(", ")
  return `not every agent succeeded (${counts})${first ? `; first: ${first.agentId} ${first._tag}` : ""}`
}

export const runAgents = async (
  agents: ReadonlyArray<AnyAgent>,
  options: Core.Corral.Options,
  signal: AbortSignal
): Promise<Core.RunResult.RunResult> => {
  const { Corral } = await core()
  const result = await Effect.runPromise(Corral.run(agents, options), { signal })
  if (!result.allSucceeded) throw new Error(describeFailures(result))
  return result
}
