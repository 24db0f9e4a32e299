/**
 * How corral names where agents of a cluster run are (or may still be) running: by runner address,
 * as the coordinator's stop wait prints them and `corral status` and the report show them. Its own
 * module so that `corral status` does not load the cluster's query code to print one line.
 *
 * @since 0.1.0
 */

/**
 * An agent and the address of the runner holding it (`undefined` when not known).
 *
 * @since 0.1.0
 * @category models
 */
export interface Placed {
  readonly agent: string
  readonly runner: string | undefined
}

/**
 * The agents by runner, in order of first appearance: `s1, s2 on runner 10.0.0.5:34431; s3`
 * (an agent whose runner is not known goes without one).
 *
 * @since 0.1.0
 * @category formatting
 */
export const byRunner = (agents: ReadonlyArray<Placed>): string => {
  const groups = new Map<string | undefined, Array<string>>()
  for (const { agent, runner } of agents) groups.set(runner, [...(groups.get(runner) ?? []), agent])
  return [...groups]
    .map(([runner, ids]) => (runner === undefined ? ids.join(", ") : `${ids.join(", ")} on runner ${runner}`))
    .join("; ")
}

/**
 * Where the agents may still be running, after `agents … of run …`: ` on runner X` for one known
 * runner, ` on their runners` when none is known, else each group (`: s1 on runner X; s2 on runner Y`).
 *
 * @since 0.1.0
 * @category formatting
 */
export const whereRunning = (agents: ReadonlyArray<Placed>): string => {
  const runners = new Set(agents.map((agent) => agent.runner))
  const [only] = runners
  if (runners.size === 1) return only === undefined ? " on their runners" : ` on runner ${only}`
  return `: ${byRunner(agents)}`
}
