import { Console, Effect } from "effect"
import { Argument, Command } from "effect/cli"
import { invalidInput } from "../CliExit.ts"
import * as PlanFile from "../PlanFile.ts"

/**
 * `corral validate <plan>`.
 *
 * @since 0.1.0
 */
export const validate = Command.make(
  "validate",
  { plan: Argument.String("plan").pipe(Argument.withDescription("The plan file (YAML or JSON)")) },
  ({ plan }) =>
    Effect.gen(function*() {
      const loaded = yield* PlanFile.load(plan).pipe(
        Effect.catchTag("PlanFileError", (error) => invalidInput(`invalid plan\n${error.message}`))
      )
      yield* Console.log(`${plan}: valid, ${loaded.agents.length} agents`)
    })
).pipe(
  Command.withDescription("Check a plan: schema, ids, dependencies, cycles and claims; print its order and critical path"),
  Command.withExamples([{ command: "corral validate plan.yaml", description: "check a plan without running it" }])
)
