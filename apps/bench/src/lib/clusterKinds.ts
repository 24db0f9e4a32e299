import { AgentKind } from "@corral/core"
import { Effect, Schema } from "effect"

/** A kind that sleeps `ms` (0: returns at once), for dispatch and throughput figures. */
export const Sleep = AgentKind.make("bench/sleep", {
  input: Schema.Struct({ ms: Schema.Number }),
  output: Schema.Null,
  handler: ({ ms }) => (ms === 0 ? Effect.succeed(null) : Effect.as(Effect.sleep(ms), null))
})
