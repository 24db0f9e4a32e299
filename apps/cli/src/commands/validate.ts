import * as Plan from "@corral/core/Plan"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as AgentIsolation from "../AgentIsolation.ts"
import { invalidInput } from "../CliExit.ts"
import * as PlanFile from "../PlanFile.ts"
import { count } from "../Plural.ts"
import * as RequiredLabels from "../RequiredLabels.ts"
import { shapeOf } from "../RunPlan.ts"

const seconds = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)}s` : `${ms}ms`)

/** The durations `Plan.analyze`'s `maxParallelism` assumed: the estimates, 1 ms for an agent without one. */
const assumedTimes = (plan: PlanFile.Plan): string => {
  const estimated = plan.agents.filter((agent) => agent.estimateMs !== undefined).length
  if (estimated === 0) return "all taking equal time"
  return estimated === plan.agents.length ? "by the estimates" : "by the estimates (1 ms for an agent without one)"
}

/**
 * The text `corral validate` prints for a valid plan.
 *
 * @since 0.1.0
 */
export const describe = (plan: PlanFile.Plan, analysis: Plan.Analysis): string => {
  const estimated = plan.agents.some((agent) => agent.estimateMs !== undefined)
  const lines = [
    `${plan.file}: valid — ${count(plan.agents.length, "agent")}, concurrency ${plan.concurrency}, mode ${plan.mode}, isolation ${plan.isolation}`,
    `order: ${analysis.order.join(", ")}`,
    `critical path: ${analysis.criticalPath.ids.join(" -> ")}${estimated ? ` (${seconds(analysis.criticalPath.totalMs)} estimated)` : ""}`,
    `most agents running at once with unlimited concurrency, ${assumedTimes(plan)}: ${analysis.maxParallelism}`
  ]
  if (analysis.conflicts.length === 0) lines.push("claims: no two agents that may run together conflict")
  for (const conflict of analysis.conflicts) {
    lines.push(`serialized by claims: ${conflict.a} and ${conflict.b} (${conflict.keys.join(", ")})`)
  }
  return lines.join("\n")
}

/**
 * Loads and checks a plan exactly as `corral validate` does; `corral run` uses the same check, so a
 * plan that validates is one the run accepts (`corral validate` also checks the labels agents
 * require, as `corral run --cluster` does). Fails with exit code 2 and the issues printed.
 *
 * @since 0.1.0
 */
export const loadChecked = (file: string) =>
  Effect.gen(function* () {
    const plan = yield* PlanFile.load(file).pipe(
      Effect.catchTag("PlanFileError", (error) => invalidInput(`invalid plan\n${error.message}`))
    )
    const analysis = Plan.analyze(shapeOf(plan), { pools: plan.pools })
    if (Result.isFailure(analysis)) return yield* invalidInput(`invalid plan ${file}\n${analysis.failure.message}`)
    const unsupported = AgentIsolation.unsupported(plan)
    if (unsupported !== undefined)
      return yield* invalidInput(`${file}: ${unsupported}\n${AgentIsolation.describeSupport()}`)
    return { plan, analysis: analysis.success }
  })

/**
 * `corral validate <plan>`.
 *
 * @since 0.1.0
 */
export const validate = Command.make(
  "validate",
  { plan: Argument.String("plan").pipe(Argument.withDescription("The plan file (YAML or JSON)")) },
  ({ plan }) =>
    Effect.gen(function* () {
      const checked = yield* loadChecked(plan)
      const unplaceable = RequiredLabels.unplaceable(checked.plan)
      if (unplaceable !== undefined) return yield* invalidInput(unplaceable)
      yield* Console.log(`${describe(checked.plan, checked.analysis)}
${AgentIsolation.describeSupport()}`)
    })
).pipe(
  Command.withDescription(
    "Check a plan: schema, ids, dependencies, cycles, claims and required runner labels; print its order and critical path, and what this machine supports (sandboxes)"
  ),
  Command.withExamples([{ command: "corral validate plan.yaml", description: "check a plan without running it" }])
)
