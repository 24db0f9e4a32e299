import { Agent, Corral, type CorralEvent } from "@corral/core"
import { ProcessAgent } from "@corral/platform-node"
import * as Blocking from "@corral/platform-node/Blocking"
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect } from "effect"

const waits: Array<string> = []

const onEvent = (event: CorralEvent.CorralEvent) =>
  Effect.sync(() => {
    if (event._tag === "WaitingForClaims") waits.push(event.agentId)
  })

const program = Effect.gen(function* () {
  const result = yield* Corral.run(
    [
      Agent.make("edit-a", { run: Effect.sleep("50 millis").pipe(Effect.as(1)), claims: { write: ["src/a.ts"] } }),
      Agent.make("edit-a-again", { run: Effect.succeed(2), claims: { write: ["src/a.ts"] } }),
      Agent.make("after-edit", {
        dependsOn: ["edit-a"],
        run: (deps: { readonly "edit-a": number }) => Effect.succeed(deps["edit-a"] + 10)
      }),
      Agent.make("too-slow", { run: Effect.never, timeout: "100 millis" }),
      ProcessAgent.make("echo", { command: process.execPath, args: ["-e", "console.log('hello from a process')"] })
    ],
    { concurrency: 4, mode: "settle", onEvent }
  )
  const outcomes: Record<string, string> = {}
  for (const outcome of result.outcomes) outcomes[outcome.agentId] = outcome._tag
  const after = result.get("after-edit")
  const echo = result.get("echo")
  const blocking = yield* Corral.run([
    Blocking.agent("double", { module: new URL("./work.js", import.meta.url), export: "double", input: 21 })
  ])
  const double = blocking.get("double")
  yield* Console.log(
    JSON.stringify({
      outcomes,
      waits,
      after: after._tag === "Succeeded" ? after.value : null,
      echo: echo._tag === "Succeeded" ? echo.value.tail : null,
      double: double?._tag === "Succeeded" ? double.value : null
    })
  )
})

program.pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
