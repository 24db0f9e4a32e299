import { appendFileSync } from "node:fs"
import { AgentKind } from "@corral/core"
import { Effect, Schema } from "effect"

/** A kind that sleeps `ms` (0: returns at once), for dispatch and throughput figures. */
export const Sleep = AgentKind.make("bench/sleep", {
  input: Schema.Struct({ ms: Schema.Number }),
  output: Schema.Null,
  handler: ({ ms }) => (ms === 0 ? Effect.succeed(null) : Effect.as(Effect.sleep(ms), null))
})

/** Appends `{ agent, pid, at }` to `log` when it starts, then sleeps `ms`: for failover figures. */
export const Mark = AgentKind.make("bench/mark", {
  input: Schema.Struct({ agent: Schema.String, ms: Schema.Number, log: Schema.String }),
  output: Schema.Null,
  handler: ({ agent, ms, log }) =>
    Effect.sync(() => appendFileSync(log, `${JSON.stringify({ agent, pid: process.pid, at: Date.now() })}\n`)).pipe(
      Effect.andThen(Effect.sleep(ms)),
      Effect.as(null)
    )
})
