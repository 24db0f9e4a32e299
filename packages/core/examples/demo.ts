import { Agent, Corral, CorralEvent, type Outcome, Usage } from "@corral/core"
import { Console, Effect } from "effect"

const work = (ms: number, costUsd = 0) =>
  Effect.gen(function* () {
    yield* Effect.sleep(ms)
    if (costUsd > 0) yield* Usage.report({ inputTokens: Math.round(costUsd * 100_000), outputTokens: 800, costUsd })
  })

const agents = [
  Agent.make("research", { run: Effect.as(work(300, 0.012), "12 sources"), timeout: "2 seconds" }),
  Agent.make("outline", {
    dependsOn: ["research"],
    run: (deps: { readonly research: string }) => Effect.as(work(200, 0.004), `outline from ${deps.research}`)
  }),
  Agent.make("edit-parser", { run: work(400), claims: { write: ["src/parser.ts"] } }),
  Agent.make("parser-tests", { run: work(300), claims: { write: ["src/parser.ts"], read: ["src/types.ts"] } }),
  Agent.make("lint", { run: work(250), claims: { read: ["src/"] } }),
  Agent.make("flaky-api", {
    run: Effect.andThen(work(100), Effect.fail({ _tag: "HttpError", message: "502 from upstream" }))
  }),
  Agent.make("hung-call", { run: work(60_000), timeout: "800 millis" }),
  Agent.make("buggy", {
    run: Effect.sync(() => {
      throw new Error("undefined is not a function")
    })
  })
]

const describe = (outcome: Outcome.Outcome): string => {
  switch (outcome._tag) {
    case "Succeeded":
      return outcome.value === undefined ? "" : JSON.stringify(outcome.value)
    case "Failed":
      return `${outcome.defect ? "defect: " : ""}${outcome.message}`
    case "TimedOut":
      return `after ${outcome.afterMs} ms`
    case "Skipped":
      return `dependency ${outcome.dependency} ${outcome.dependencyOutcome}`
    case "ClaimTimedOut":
      return outcome.blockers.map((b) => `${b.key} held by ${b.holder}`).join(", ")
    default:
      return outcome.reason
  }
}

const onEvent = (event: CorralEvent.CorralEvent) => {
  const clock = `${String(event.at - start).padStart(5)} ms`
  switch (event._tag) {
    case "Started":
      return Console.log(`${clock}  started   ${event.agentId}  (${event.progress.running} running)`)
    case "WaitingForClaims":
      return Console.log(
        `${clock}  waiting   ${event.agentId} for ${event.blockers.map(CorralEvent.formatBlocker).join(", ")}`
      )
    case "Finished":
      return Console.log(`${clock}  ${event.outcome._tag.toLowerCase().padEnd(9)} ${event.agentId}`)
    default:
      return Effect.void
  }
}

const start = Date.now()
const program = Effect.gen(function* () {
  yield* Console.log("corral demo: 8 agents, at most 3 at a time\n")
  const result = yield* Corral.run(agents, { concurrency: 3, onEvent })
  yield* Console.log("\nagent          outcome      attempts  waited   ran     detail")
  for (const o of result.outcomes) {
    const ran = o.startedAt === null ? "-" : `${o.endedAt - o.startedAt} ms`
    yield* Console.log(
      `${o.agentId.padEnd(14)} ${o._tag.padEnd(12)} ${String(o.attempts).padEnd(9)} ${`${o.waitedMs} ms`.padEnd(8)} ${ran.padEnd(7)} ${describe(o)}`
    )
  }
  yield* Console.log(
    `\n${result.succeeded.length}/${result.outcomes.length} succeeded in ${result.wallMs} ms; cost $${result.usage.costUsd.toFixed(3)}, ${Usage.tokens(result.usage)} tokens`
  )
})

Effect.runPromise(program)
