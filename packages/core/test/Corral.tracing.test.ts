import { Agent, Corral } from "@corral/core"
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { assert, describe, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect } from "effect"

describe("Corral.run tracing", () => {
  it.effect("records a span per run and per agent with id, attempts and outcome", () =>
    Effect.gen(function* () {
      const exporter = new InMemorySpanExporter()
      const spans = yield* Effect.gen(function* () {
        yield* Corral.run(
          [Agent.make("ok", { run: Effect.succeed(1) }), Agent.make("bad", { run: Effect.fail("no") })],
          {
            runId: "traced"
          }
        )
        return [...exporter.getFinishedSpans()]
      }).pipe(
        Effect.provide(
          NodeSdk.layer(() => ({
            resource: { serviceName: "corral-test" },
            spanProcessor: new SimpleSpanProcessor(exporter)
          }))
        )
      )
      const run = spans.find((s) => s.name === "corral.run")
      assert.strictEqual(run?.attributes["corral.run.id"], "traced")
      const agents = spans.filter((s) => s.name === "corral.agent")
      assert.deepStrictEqual(
        agents
          .map((s) => [
            s.attributes["corral.agent.id"],
            s.attributes["corral.agent.outcome"],
            s.attributes["corral.agent.attempts"]
          ])
          .sort(),
        [
          ["bad", "Failed", 1],
          ["ok", "Succeeded", 1]
        ]
      )
      for (const agent of agents) assert.strictEqual(agent.parentSpanContext?.spanId, run?.spanContext().spanId)
    })
  )
})
