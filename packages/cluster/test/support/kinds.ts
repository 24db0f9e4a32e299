import { appendFileSync, existsSync } from "node:fs"
import { Agent, AgentKind, Executor } from "@corral/core"
import { Effect, Schema } from "effect"

/**
 * Sleeps (then, with `release`, waits until that file exists), and reports which process ran it,
 * when, and with which fencing token (appending the same to `log` when given); its "end" is a write
 * that a fenced execution must not make. Every execution that ends in its process, however it ends
 * (succeeded, fenced, interrupted), also logs an "exit" line.
 */
export const Probe = AgentKind.make("probe", {
  input: Schema.Struct({
    sleepMs: Schema.Number,
    log: Schema.optional(Schema.String),
    release: Schema.optional(Schema.String)
  }),
  output: Schema.Struct({
    pid: Schema.Number,
    start: Schema.Number,
    end: Schema.Number,
    token: Schema.NullOr(Schema.Number)
  }),
  handler: ({ sleepMs, log, release }) =>
    Effect.gen(function* () {
      const me = yield* Agent.current
      const record = (event: "start" | "end" | "exit", at: number) => {
        if (log !== undefined)
          appendFileSync(
            log,
            `${JSON.stringify({ event, agent: me?.agentId, pid: process.pid, at, token: me?.fencingToken })}\n`
          )
      }
      const start = Date.now()
      record("start", start)
      return yield* Effect.gen(function* () {
        yield* Effect.sleep(sleepMs)
        if (release !== undefined)
          yield* Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => existsSync(release) }))
        if (!(yield* Executor.stillCurrent)) return yield* Effect.interrupt
        const end = Date.now()
        record("end", end)
        return { pid: process.pid, start, end, token: me?.fencingToken ?? null }
      }).pipe(Effect.onExit(() => Effect.sync(() => record("exit", Date.now()))))
    })
})
