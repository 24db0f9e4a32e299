/**
 * The label rule (`RunnerLabels`) as a settings check: a malformed label dies with
 * `PostgresOptions.InvalidOption`, as every other setting a runner cannot use.
 */
import { PostgresOptions } from "@corral/postgres"
import * as Effect from "effect/Effect"
import { labelsProblem } from "../RunnerLabels.ts"

/** `labels` when each is a valid label, given once; dies with `PostgresOptions.InvalidOption` naming `module` otherwise. */
export const checkLabels = (module: string, labels: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.suspend(() => {
    const reason = labelsProblem(labels)
    return reason === undefined
      ? Effect.succeed(labels)
      : Effect.die(new PostgresOptions.InvalidOption({ module, option: "labels", reason }))
  })
