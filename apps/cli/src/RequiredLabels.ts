/**
 * The labels a plan's agents require (`labels.requires`) checked against the runner label rule
 * (`@corral/cluster/RunnerLabels`): a label no runner can have would leave its agent unplaced.
 * `corral validate` and `corral run --cluster` report the same message.
 *
 * @since 0.1.0
 */
import * as RunnerLabels from "@corral/cluster/RunnerLabels"
import type * as PlanFile from "./PlanFile.ts"

/**
 * The first agent whose required label no runner can have, said with the plan file, the agent, the
 * label and why; `undefined` when every required label can be a runner's.
 *
 * @since 0.1.0
 * @category validation
 */
export const unplaceable = (plan: PlanFile.Plan): string | undefined => {
  for (const agent of plan.agents) {
    const label = agent.labels.requires
    const problem = label === undefined ? undefined : RunnerLabels.labelsProblem([label])
    if (problem !== undefined)
      return `${plan.file}: agent ${agent.id} requires the label ${JSON.stringify(label)}, which no runner can have: ${problem}`
  }
  return undefined
}
