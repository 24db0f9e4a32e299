import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { Agent, Corral } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"
import * as Telemetry from "../src/Telemetry.ts"

interface Received {
  readonly path: string
  readonly contentType: string | undefined
  readonly body: string
}

interface OtlpAttribute {
  readonly key: string
  readonly value: { readonly stringValue?: string; readonly intValue?: string | number }
}

interface OtlpSpan {
  readonly name: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly attributes: ReadonlyArray<OtlpAttribute>
}

interface OtlpTraces {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<OtlpAttribute> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const receiver = Effect.acquireRelease(
  Effect.callback<{ readonly url: string; readonly received: Array<Received>; readonly server: NodeHttp.Server }>(
    (resume) => {
      const received: Array<Received> = []
      const server = NodeHttp.createServer((req, res) => {
        let body = ""
        req.on("data", (chunk) => (body += chunk))
        req.on("end", () => {
          received.push({ path: req.url ?? "", contentType: req.headers["content-type"], body })
          res.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, received, server }))
      })
    }
  ),
  ({ server }) =>
    Effect.callback<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

const attribute = (attributes: ReadonlyArray<OtlpAttribute>, key: string) => {
  const value = attributes.find((a) => a.key === key)?.value
  return value?.stringValue ?? value?.intValue
}

const tracesOf = (received: ReadonlyArray<Received>) => received.filter((r) => r.path === "/v1/traces")

const spansOf = (received: ReadonlyArray<Received>): ReadonlyArray<OtlpSpan> =>
  tracesOf(received).flatMap((r) =>
    (JSON.parse(r.body) as OtlpTraces).resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans))
  )

const agents = [
  Agent.make("alpha", { run: Effect.succeed(1) }),
  Agent.make("beta", { run: Effect.succeed(2) }),
  Agent.make("gamma", { run: Effect.fail("boom") })
]

describe("Telemetry.endpointFrom", () => {
  it("prefers the flag, then OTEL_EXPORTER_OTLP_ENDPOINT, and treats blanks as absent", () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }
    assert.strictEqual(Telemetry.endpointFrom(Option.some("http://flag:4318"), env), "http://flag:4318")
    assert.strictEqual(Telemetry.endpointFrom(Option.none(), env), "http://collector:4318")
    assert.strictEqual(Telemetry.endpointFrom(Option.some("  "), env), "http://collector:4318")
    assert.isUndefined(Telemetry.endpointFrom(Option.none(), { OTEL_EXPORTER_OTLP_ENDPOINT: "" }))
    assert.isUndefined(Telemetry.endpointFrom(Option.none(), {}))
  })
})

describe("Telemetry.layer", () => {
  it.effect("is empty without an endpoint: the native tracer stays in place", () =>
    Effect.gen(function* () {
      const tracer = yield* Tracer.Tracer.pipe(
        Effect.provide(Telemetry.layer(undefined, { serviceName: "corral", runId: "r-off" }))
      )
      assert.strictEqual(tracer, Tracer.nativeTracer)
    })
  )

  it.live("exports corral.run and one corral.agent span per agent to <endpoint>/v1/traces when it closes", () =>
    Effect.gen(function* () {
      const { url, received } = yield* receiver
      const result = yield* Corral.run(agents, { runId: "r-otlp" }).pipe(
        Effect.provide(Telemetry.layer(`${url}/`, { serviceName: "corral", runId: "r-otlp" }))
      )
      assert.strictEqual(result.outcomes.length, 3)
      const traces = tracesOf(received)
      assert.isAbove(traces.length, 0, "no POST to /v1/traces")
      assert.match(traces[0]!.contentType ?? "", /application\/json/)
      const resource = (JSON.parse(traces[0]!.body) as OtlpTraces).resourceSpans[0]!.resource
      assert.strictEqual(attribute(resource.attributes, "service.name"), "corral")
      assert.strictEqual(attribute(resource.attributes, "corral.run.id"), "r-otlp")
      const spans = spansOf(received)
      const runSpans = spans.filter((s) => s.name === "corral.run")
      assert.strictEqual(runSpans.length, 1)
      assert.strictEqual(attribute(runSpans[0]!.attributes, "corral.run.id"), "r-otlp")
      const outcomes = Object.fromEntries(
        spans
          .filter((s) => s.name === "corral.agent")
          .map((s) => [attribute(s.attributes, "corral.agent.id"), attribute(s.attributes, "corral.agent.outcome")])
      )
      assert.deepStrictEqual(outcomes, { alpha: "Succeeded", beta: "Succeeded", gamma: "Failed" })
      const agentSpans = spans.filter((s) => s.name === "corral.agent")
      assert.strictEqual(agentSpans.length, 3)
      for (const span of agentSpans) assert.strictEqual(span.parentSpanId, runSpans[0]!.spanId)
    }).pipe(Effect.scoped)
  )

  it.live("with { logs: true } also exports log records to <endpoint>/v1/logs", () =>
    Effect.gen(function* () {
      const { url, received } = yield* receiver
      yield* Effect.logInfo("agent started").pipe(
        Effect.provide(Telemetry.layer(url, { serviceName: "corral", runId: "r-logs" }, { logs: true }))
      )
      const logs = received.filter((r) => r.path === "/v1/logs")
      assert.strictEqual(logs.length, 1)
      assert.include(logs[0]!.body, "agent started")
    }).pipe(Effect.scoped)
  )
})
