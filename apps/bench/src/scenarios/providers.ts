import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { OpenAiCompat } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { LanguageModel, type Response } from "effect/ai"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { NodeHttpClient } from "@effect/platform-node"
import { ownCpuMs } from "../lib/cpu.ts"
import { ratioAtMost } from "../lib/targets.ts"
import type { Approach, Scenario } from "../types.ts"

interface Params {
  readonly url: string
  readonly calls: number
  readonly concurrency: number
}

const completion = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  model: "bench-model",
  choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 }
})

/** A Chat Completions server on 127.0.0.1 answering every request with the same small completion. */
const startServer = (): Promise<string> =>
  new Promise((resolve) => {
    const server = Http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(completion)
      })
    })
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => {
      server.unref()
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    })
  })

const body = JSON.stringify({ model: "bench-model", messages: [{ role: "user", content: "Say ok" }] })

const inBatches = async (p: Params, call: () => Promise<unknown>): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < p.calls) {
      next++
      await call()
    }
  }
  await Promise.all(Array.from({ length: p.concurrency }, worker))
}

const bareFetch: Approach<Params> = {
  name: "bare fetch + JSON.parse",
  run: async (p) => {
    const start = performance.now()
    await inBatches(p, async () => {
      const response = await fetch(`${p.url}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer bench" },
        body
      })
      const json = (await response.json()) as { choices: Array<{ message: { content: string } }> }
      if (json.choices[0]?.message.content !== "ok") throw new Error("unexpected reply")
    })
    return { ms: performance.now() - start }
  }
}

/** One POST of the bench request through effect's client, its body parsed as JSON. */
const post = (client: HttpClient.HttpClient, url: string) =>
  client
    .execute(
      HttpClientRequest.post(`${url}/chat/completions`).pipe(
        HttpClientRequest.bodyText(body, "application/json"),
        HttpClientRequest.bearerToken("bench")
      )
    )
    .pipe(
      Effect.flatMap((response) => response.text),
      Effect.map(
        (text) => JSON.parse(text) as { id: string; model: string; choices: Array<{ message: { content: string } }> }
      )
    )

const timed = async <R>(
  p: Params,
  signal: AbortSignal,
  call: Effect.Effect<unknown, unknown, R>,
  layer: Layer.Layer<R>
): Promise<{ ms: number }> => {
  const program = Effect.forEach(Array.from({ length: p.calls }), () => call, {
    concurrency: p.concurrency,
    discard: true
  })
  const start = performance.now()
  await Effect.runPromise(Effect.provide(program, layer), { signal })
  return { ms: performance.now() - start }
}

const effectHttp = (name: string, transport: Layer.Layer<HttpClient.HttpClient>): Approach<Params> => ({
  name,
  run: (p, { signal }) =>
    timed(
      p,
      signal,
      Effect.flatMap(HttpClient.HttpClient, (client) => post(client, p.url)),
      transport
    )
})

/**
 * effect's `LanguageModel.make` over the same POST, the reply turned into the parts corral's provider
 * returns by hand (no request building, response schema, deadline or usage reporting): what
 * `LanguageModel.generateText` itself costs on top of the `effect/http` row.
 */
const effectLanguageModel = (name: string, transport: Layer.Layer<HttpClient.HttpClient>): Approach<Params> => ({
  name,
  run: (p, { signal }) => {
    const model = Layer.effect(
      LanguageModel.LanguageModel,
      Effect.flatMap(HttpClient.HttpClient, (client) =>
        LanguageModel.make({
          generateText: () =>
            post(client, p.url).pipe(
              Effect.map(
                (json): Array<Response.PartEncoded> => [
                  { type: "response-metadata", id: json.id, modelId: json.model },
                  { type: "text", text: json.choices[0]?.message.content ?? "" },
                  {
                    type: "finish",
                    reason: "stop",
                    usage: { inputTokens: { total: 12, uncached: 12, cacheRead: 0 }, outputTokens: { total: 1 } }
                  }
                ]
              ),
              Effect.orDie
            ),
          streamText: () => Stream.die("not benchmarked")
        })
      )
    ).pipe(Layer.provide(transport))
    return timed(p, signal, reply, model)
  }
})

const reply = LanguageModel.generateText({ prompt: "Say ok" }).pipe(
  Effect.flatMap((response) => (response.text === "ok" ? Effect.void : Effect.die("unexpected reply")))
)

const corralName = "corral OpenAiCompat generateText"
const corralUndiciName = "corral OpenAiCompat generateText (NodeHttpClient.layerUndici)"

const corralProvider = (name: string, transport: Layer.Layer<HttpClient.HttpClient>): Approach<Params> => ({
  name,
  run: (p, { signal }) =>
    timed(
      p,
      signal,
      reply,
      OpenAiCompat.layer({ model: "bench-model", baseUrl: p.url }).pipe(Layer.orDie, Layer.provide(transport))
    )
})

/**
 * `approach` with the CPU time (`process.cpuUsage()`, every thread, the server's included) per call:
 * on a loaded machine wall time mostly measures the other processes; the CPU per call does not.
 */
const withCpuPerCall = (approach: Approach<Params>): Approach<Params> => ({
  name: approach.name,
  run: async (p, context) => {
    const before = ownCpuMs()
    const sample = await approach.run(p, context)
    return { ...sample, metrics: { ...sample.metrics, cpuUsPerCall: ((ownCpuMs() - before) * 1000) / p.calls } }
  }
})

export const providers: Scenario<Params> = {
  name: "providers",
  description:
    "Chat Completions calls against a local server on 127.0.0.1 answering at once, 100 in flight: the " +
    "cost of corral's OpenAI-compatible provider (effect/http client, schema decoding, usage reporting) " +
    "over a bare fetch of the same request, with effect's fetch client and with its undici client; beside " +
    "each, effect's client alone and effect's LanguageModel with the parts built by hand, which split the " +
    "gap into effect's client, effect's LanguageModel and corral's own part.",
  floor: "bare fetch + JSON.parse of the same request against the same server; ratio = provider / fetch",
  targets: [
    ratioAtMost("corral provider ≤ 1.1× a bare fetch at 100 concurrent calls", /calls/, corralName, 1.1),
    ratioAtMost(
      "corral provider over undici ≤ 1.1× a bare fetch at 100 concurrent calls",
      /calls/,
      corralUndiciName,
      1.1
    )
  ],
  floorApproach: "bare fetch + JSON.parse",
  columns: [{ key: "cpuUsPerCall", label: "CPU/call", format: (v) => `${v.toFixed(0)} µs` }],
  approaches: [
    bareFetch,
    effectHttp("effect/http HttpClient POST + JSON.parse", FetchHttpClient.layer),
    effectLanguageModel("effect LanguageModel.generateText, parts built by hand", FetchHttpClient.layer),
    corralProvider(corralName, FetchHttpClient.layer),
    effectHttp("effect/http HttpClient POST + JSON.parse (NodeHttpClient.layerUndici)", NodeHttpClient.layerUndici),
    effectLanguageModel(
      "effect LanguageModel.generateText, parts built by hand (NodeHttpClient.layerUndici)",
      NodeHttpClient.layerUndici
    ),
    corralProvider(corralUndiciName, NodeHttpClient.layerUndici)
  ].map(withCpuPerCall),
  cases: async (options) => {
    const url = await startServer()
    const calls = options.quick ? 1000 : 5000
    return [{ label: `${calls} calls, 100 concurrent`, params: { url, calls, concurrency: 100 } }]
  }
}
