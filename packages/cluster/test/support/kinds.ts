import { appendFileSync } from "node:fs"
import { Agent, AgentKind } from "@corral/core"
import { Effect, Schema } from "effect"

/** Sleeps, and reports which process ran it and when (appending the same to `log` when given). */
export const Probe = AgentKind.make("probe", {
  input: Schema.Struct({ sleepMs: Schema.Number, log: Schema.optional(Schema.String) }),
  output: Schema.Struct({
    pid: Schema.Number,
    start: Schema.Number,
    end: Schema.Number,
    token: Schema.NullOr(Schema.Number)
  }),
  handler: ({ sleepMs, log }) =>
    Effect.gen(function* () {
      const me = yield* Agent.current
      const start = Date.now()
      if (log !== undefined)
        appendFileSync(log, `${JSON.stringify({ event: "start", agent: me?.agentId, pid: process.pid, at: start })}\n`)
      yield* Effect.sleep(sleepMs)
      const end = Date.now()
      if (log !== undefined)
        appendFileSync(log, `${JSON.stringify({ event: "end", agent: me?.agentId, pid: process.pid, at: end })}\n`)
      return { pid: process.pid, start, end, token: me?.fencingToken ?? null }
    })
})
