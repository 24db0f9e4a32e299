import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"
import { connectCounter, connectsIn } from "./support/stalls.ts"

interface Received {
  readonly path: string
  readonly body: string
}

interface OtlpAttribute {
  readonly key: string
  readonly value: { readonly stringValue?: string }
}

interface OtlpSpan {
  readonly name: string
  readonly attributes: ReadonlyArray<OtlpAttribute>
}

interface OtlpTraces {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<OtlpAttribute> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const servers: Array<NodeHttp.Server> = []
afterEach(() => {
  for (const server of servers.splice(0)) server.close()
})

const startReceiver = async (): Promise<{ readonly url: string; readonly received: Array<Received> }> => {
  const received: Array<Received> = []
  const server = NodeHttp.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      received.push({ path: req.url ?? "", body })
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received }
}

const attribute = (attributes: ReadonlyArray<OtlpAttribute>, key: string) =>
  attributes.find((a) => a.key === key)?.value.stringValue

const tracesOf = (received: ReadonlyArray<Received>): ReadonlyArray<OtlpTraces> =>
  received.filter((r) => r.path === "/v1/traces").map((r) => JSON.parse(r.body) as OtlpTraces)

const spansOf = (traces: ReadonlyArray<OtlpTraces>): ReadonlyArray<OtlpSpan> =>
  traces.flatMap((t) => t.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)))

const plan = `version: 1
concurrency: 3
agents:
  - id: one
    run: echo one > one.txt
  - id: two
    run: echo two > two.txt
  - id: three
    run: echo three > three.txt
`

const runArgs = (repo: string) => [
  "run",
  writePlan(tempDir("plan-"), "plan.yaml", plan),
  "--repo",
  repo,
  "--isolation",
  "directory"
]

describe("corral run with OTEL_EXPORTER_OTLP_ENDPOINT (end to end)", () => {
  it("sends corral.run and one corral.agent span per agent to the collector before exiting", async () => {
    const { url, received } = await startReceiver()
    const repo = makeRepo()
    const result = await runCli(runArgs(repo), {
      cwd: repo,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: url }
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const traces = tracesOf(received)
    expect(traces.length, `no POST /v1/traces; got ${JSON.stringify(received.map((r) => r.path))}`).toBeGreaterThan(0)
    const resource = traces[0]!.resourceSpans[0]!.resource.attributes
    expect(attribute(resource, "service.name")).toBe("corral")
    const spans = spansOf(traces)
    const run = spans.filter((s) => s.name === "corral.run")
    expect(run).toHaveLength(1)
    expect(attribute(run[0]!.attributes, "corral.run.id")).toBe(attribute(resource, "corral.run.id"))
    const agents = spans
      .filter((s) => s.name === "corral.agent")
      .map((s) => [attribute(s.attributes, "corral.agent.id"), attribute(s.attributes, "corral.agent.outcome")])
    expect(Object.fromEntries(agents)).toEqual({ one: "Succeeded", two: "Succeeded", three: "Succeeded" })
    expect(agents).toHaveLength(3)
  })

  it("still exits 0 when the collector is unreachable, after one connection attempt: no export retries during the run, no flush at exit", async () => {
    const { url } = await startReceiver()
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
    const counted = tempDir("connects-")
    const preload = connectCounter(counted, Number(new URL(url).port))
    const repo = makeRepo()
    const result = await runCli(runArgs(repo), {
      cwd: repo,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: url, NODE_OPTIONS: `--import ${preload}` }
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain("3 succeeded")
    // the reachability check's one attempt; each export retry (each waiting out its backoff) or flush
    // at exit would be another
    expect(connectsIn(counted), "connections corral started to the collector").toBe(1)
    const output = result.stdout + result.stderr
    expect(output.match(/cannot reach the OTLP collector at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/g)).toHaveLength(
      1
    )
  })

  it("warns once when the collector refuses the spans", async () => {
    const server = NodeHttp.createServer((req, res) => {
      req.resume()
      req.on("end", () => res.writeHead(500).end())
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const repo = makeRepo()
    const result = await runCli(runArgs(repo), { cwd: repo, env: { OTEL_EXPORTER_OTLP_ENDPOINT: url } })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const output = result.stdout + result.stderr
    expect(output.match(/exporting telemetry to http:\/\/127\.0\.0\.1:\d+ failed/g)).toHaveLength(1)
  })
})
