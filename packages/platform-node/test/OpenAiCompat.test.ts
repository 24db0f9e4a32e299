import { Agent, Corral, Llm, OpenAiCompat, RateLimiter } from "@corral/core"
import * as FakeModelServer from "@corral/platform-node/FakeModelServer"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Latch, Layer, Queue, Redacted, Schedule, Schema, Stream } from "effect"
import { type AiError, LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
import { FetchHttpClient, type HttpClient } from "effect/http"
import { TestClock } from "effect/testing"
import { listening } from "./fixtures/httpServer.ts"
import { collectUsage, redirectedClient, streamed } from "./fixtures/models.ts"
import { keepAliveServer, stallingServer, steppedServer } from "./fixtures/stallingServer.ts"

const model = (url: string, options: Partial<OpenAiCompat.Options> = {}) =>
  OpenAiCompat.layer({
    model: "test-model",
    baseUrl: url,
    apiKey: Redacted.make("sk-secret-123"),
    prices: { "test-model": { inputPerMillion: 1000, outputPerMillion: 2000, cachedInputPerMillion: 100 } },
    ...options
  }).pipe(Layer.orDie, Layer.provide(FetchHttpClient.layer))

const deltaEvent = (content: string) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`

const failureOf = <A, R>(effect: Effect.Effect<A, AiError.AiError, R>) =>
  Effect.flip(effect).pipe(Effect.map((error) => error.reason))

const GetWeather = Tool.make("get_weather", {
  description: "Weather for a city",
  parameters: Schema.Struct({ city: Schema.String }),
  success: Schema.String
})
const Weather = Toolkit.make(GetWeather)
const weatherHandlers = Weather.toLayer({ get_weather: ({ city }) => Effect.succeed(`sunny in ${city}`) })

/** A server on 127.0.0.1 that answers 200 with part of a JSON body, then drops the connection. */
const cutBodyServer = listening((req, res) => {
  req.resume()
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "content-length": "500" })
    res.write('{"id":"x","choices":[{"mess', () => res.socket?.destroy())
  })
}).pipe(Effect.map((url) => `${url}/v1`))

/**
 * A server on 127.0.0.1 that reads each request and never answers; `closed` waits for the
 * connection that carried the first request to close, `requests` counts them.
 */
const silentServer = Effect.gen(function* () {
  let requests = 0
  const closed = Latch.makeUnsafe(false)
  const url = yield* listening((req) => {
    if (++requests === 1) req.socket.on("close", () => closed.openUnsafe())
    req.resume()
  })
  return { url: `${url}/v1`, closed: closed.await, requests: () => requests }
})

describe("OpenAiCompat", () => {
  it.effect("generates text over HTTP, sends the key as a bearer token and reports usage with its cost", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAi({ text: "hello there", inputTokens: 1000, outputTokens: 500, cachedInputTokens: 400 })
      )
      const { value, reported } = yield* collectUsage(
        LanguageModel.generateText({ prompt: "Say hello" }).pipe(Effect.provide(model(server.url)))
      )
      assert.strictEqual(value.text, "hello there")
      assert.strictEqual(value.usage.inputTokens.total, 1000)
      assert.strictEqual(value.usage.inputTokens.cacheRead, 400)
      assert.strictEqual(value.finishReason, "stop")
      // 600 fresh × $1000/M + 400 cached × $100/M + 500 out × $2000/M = 0.6 + 0.04 + 1.0
      assert.deepStrictEqual(reported, [{ inputTokens: 1000, outputTokens: 500, costUsd: 1.64 }])
      const request = server.requests[0]!
      assert.strictEqual(request.path, "/chat/completions")
      assert.strictEqual(request.headers.authorization, "Bearer sk-secret-123")
      assert.strictEqual(request.body.model, "test-model")
      assert.deepStrictEqual(request.body.messages, [{ role: "user", content: "Say hello" }])
    }).pipe(Effect.scoped)
  )

  it.effect("sends tools, resolves the model's tool call and sends the result back in the next turn", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.openAi({ toolCalls: [{ id: "call_1", name: "get_weather", params: { city: "Oslo" } }] })
          : FakeModelServer.openAi({ text: "It is sunny in Oslo." })
      )
      const generate = (prompt: Prompt.RawInput) =>
        LanguageModel.generateText({ prompt, toolkit: Weather }).pipe(Effect.provide(model(server.url)))
      const first = yield* generate("Weather in Oslo?")
      assert.deepStrictEqual(
        first.toolCalls.map((call) => [call.name, call.params]),
        [["get_weather", { city: "Oslo" }]]
      )
      assert.deepStrictEqual(
        first.toolResults.map((result) => result.result),
        ["sunny in Oslo"]
      )
      const sentTools = server.requests[0]!.body.tools
      assert.strictEqual(sentTools[0].function.name, "get_weather")
      assert.strictEqual(sentTools[0].function.parameters.properties.city.type, "string")
      const followUp = Prompt.concat(Prompt.make("Weather in Oslo?"), Prompt.fromResponseParts(first.content))
      const second = yield* generate(followUp)
      assert.strictEqual(second.text, "It is sunny in Oslo.")
      const messages = server.requests[1]!.body.messages
      assert.deepStrictEqual(messages[1].tool_calls, [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }
      ])
      assert.deepStrictEqual(messages[2], { role: "tool", tool_call_id: "call_1", content: "sunny in Oslo" })
    }).pipe(Effect.scoped, Effect.provide(weatherHandlers))
  )

  it.effect("streams text deltas and tool calls over SSE and reports usage at the end", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({
          text: "streamed answer",
          toolCalls: [{ id: "call_9", name: "get_weather", params: { city: "Lima" } }],
          inputTokens: 10,
          outputTokens: 20
        })
      )
      const { value: parts, reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt: "go", toolkit: Weather, disableToolCallResolution: true }).pipe(
          Stream.runCollect,
          Effect.provide(model(server.url))
        )
      )
      assert.deepStrictEqual(streamed(parts), {
        text: "streamed answer",
        call: ["call_9", { city: "Lima" }],
        finishReason: "tool-calls"
      })
      assert.deepStrictEqual(reported, [{ inputTokens: 10, outputTokens: 20, costUsd: 0.05 }])
      assert.strictEqual(server.requests[0]!.body.stream, true)
      assert.deepStrictEqual(server.requests[0]!.body.stream_options, { include_usage: true })
    }).pipe(Effect.scoped, Effect.provide(weatherHandlers))
  )

  it.live("under Llm.layer a stream answered 429 is retried after Retry-After and its usage reported once", () =>
    Effect.gen(function* () {
      let calls = 0
      const server = yield* FakeModelServer.make(() =>
        ++calls === 1
          ? FakeModelServer.rateLimited(0.05)
          : FakeModelServer.openAiStream({ text: "streamed answer", inputTokens: 10, outputTokens: 20 })
      )
      const { value: parts, reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt: "go" }).pipe(
          Stream.runCollect,
          Effect.provide(Llm.layer({}).pipe(Layer.provide(model(server.url))))
        )
      )
      assert.strictEqual(streamed(parts).text, "streamed answer")
      assert.strictEqual(server.requests.length, 2)
      assert.deepStrictEqual(reported, [{ inputTokens: 10, outputTokens: 20, costUsd: 0.05 }])
    }).pipe(Effect.scoped)
  )

  it.effect("generateObject asks for a json_schema response format and decodes the JSON text", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: '{"city":"Oslo","celsius":4}' }))
      const response = yield* LanguageModel.generateObject({
        prompt: "Weather?",
        objectName: "Weather",
        schema: Schema.Struct({ city: Schema.String, celsius: Schema.Number })
      }).pipe(Effect.provide(model(server.url)))
      assert.deepStrictEqual(response.value, { city: "Oslo", celsius: 4 })
      const format = server.requests[0]!.body.response_format
      assert.strictEqual(format.type, "json_schema")
      assert.strictEqual(format.json_schema.name, "Weather")
      assert.strictEqual(format.json_schema.schema.properties.city.type, "string")
    }).pipe(Effect.scoped)
  )

  it.effect("a 429 with Retry-After is a retryable RateLimitError that becomes corral's RateLimited", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.rateLimited(7))
      const error = yield* Effect.flip(
        LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      )
      assert.strictEqual(error.reason._tag, "RateLimitError")
      assert.isTrue(error.isRetryable)
      assert.strictEqual(RateLimiter.retryAfterOf(error), 7000)
      const limited = Llm.toRateLimited(error, "openai")
      assert.strictEqual(limited?._tag, "RateLimited")
      assert.strictEqual(limited?.retryAfter, 7000)
      assert.notInclude(JSON.stringify(error), "sk-secret-123")
    }).pipe(Effect.scoped)
  )

  it.effect("a 529 without Retry-After waits the default", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.rateLimited(undefined, 529))
      const error = yield* Effect.flip(
        LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(model(server.url, { defaultRetryAfter: "3 seconds" }))
        )
      )
      assert.strictEqual(error.reason._tag, "RateLimitError")
      assert.strictEqual(RateLimiter.retryAfterOf(error), 3000)
    }).pipe(Effect.scoped)
  )

  it.effect("500 is retryable, 400 and 401 are not, and the provider's message is kept", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.failure(500, "upstream exploded")
          : call === 2
            ? FakeModelServer.failure(400, "max_tokens is too large")
            : FakeModelServer.failure(401, "Incorrect API key provided")
      )
      const call = LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      const serverError = yield* failureOf(call)
      assert.strictEqual(serverError._tag, "InternalProviderError")
      assert.isTrue(serverError.isRetryable)
      assert.include(serverError.message, "upstream exploded")
      const badRequest = yield* failureOf(call)
      assert.strictEqual(badRequest._tag, "InvalidRequestError")
      assert.isFalse(badRequest.isRetryable)
      assert.include(badRequest.message, "max_tokens is too large")
      const auth = yield* failureOf(call)
      assert.strictEqual(auth._tag, "AuthenticationError")
      assert.isFalse(auth.isRetryable)
    }).pipe(Effect.scoped)
  )

  it.effect("malformed JSON and a body of the wrong shape fail with InvalidResponseError saying what was wrong", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.raw('{"choices": [')
          : FakeModelServer.json({ choices: [{ message: { content: 3 } }] })
      )
      const call = LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      const malformed = yield* failureOf(call)
      assert.strictEqual(malformed._tag, "InvalidResponseError")
      assert.include(malformed.message, "not valid JSON")
      const shape = yield* failureOf(call)
      assert.strictEqual(shape._tag, "InvalidResponseError")
      assert.include(shape.message, "unexpected shape")
      assert.include(shape.message, "content")
    }).pipe(Effect.scoped)
  )

  it.live("a whole-JSON answer cut mid-body by a dropped connection is a retryable NetworkError", () =>
    Effect.gen(function* () {
      const url = yield* cutBodyServer
      const error = yield* failureOf(LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(url))))
      assert.strictEqual(error._tag, "NetworkError")
      assert.isTrue(error.isRetryable)
      assert.include(error.message, "the response body was cut before its end")
    }).pipe(Effect.scoped)
  )

  it.effect("a stream cut mid-way fails with a retryable NetworkError after the parts that arrived", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "a long answer that will be cut", outputTokens: 9 }, 3)
      )
      const seen: Array<string> = []
      const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
        Stream.runForEach((part) => Effect.sync(() => part.type === "text-delta" && seen.push(part.delta))),
        Effect.flip,
        Effect.provide(model(server.url))
      )
      assert.strictEqual(seen.join(""), "a long a")
      assert.strictEqual(error.reason._tag, "NetworkError")
      assert.isTrue(error.isRetryable)
      assert.include(error.message, "the event stream was cut after HTTP 200: ")
      assert.strictEqual(error.message.split(server.url).length - 1, 1, error.message)
    }).pipe(Effect.scoped)
  )

  it.effect("a stream cut mid-way reports what it received, counted at 4 characters a token, priced", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "a long answer that will be cut", outputTokens: 9 }, 3)
      )
      const prompt = Prompt.make("x")
      const { reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt }).pipe(Stream.runDrain, Effect.flip, Effect.provide(model(server.url)))
      )
      const inputTokens = Math.ceil(JSON.stringify(prompt.content).length / 4)
      assert.deepStrictEqual(reported, [
        { inputTokens, outputTokens: 2, costUsd: (inputTokens * 1000 + 2 * 2000) / 1_000_000 }
      ])
    }).pipe(Effect.scoped)
  )

  it.effect("a stream its consumer stops after its first part reports what it received; a whole one once", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "abcdefgh", inputTokens: 5, outputTokens: 9 })
      )
      const stopped = yield* collectUsage(
        LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.filter((part) => part.type === "text-delta"),
          Stream.take(1),
          Stream.runCollect,
          Effect.provide(model(server.url))
        )
      )
      assert.strictEqual(stopped.reported.length, 1)
      assert.isAbove(stopped.reported[0]!.inputTokens!, 0)
      assert.isAbove(stopped.reported[0]!.outputTokens!, 0)
      const whole = yield* collectUsage(
        LanguageModel.streamText({ prompt: "x" }).pipe(Stream.runDrain, Effect.provide(model(server.url)))
      )
      assert.deepStrictEqual(
        whole.reported.map((usage) => [usage.inputTokens, usage.outputTokens]),
        [[5, 9]]
      )
    }).pipe(Effect.scoped)
  )

  it.effect("a stream cut after its usage chunk reports the server's exact counts, priced", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "abcd", inputTokens: 50, outputTokens: 9, cachedInputTokens: 10 }, 4)
      )
      const { reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt: "x" }).pipe(Stream.runDrain, Effect.flip, Effect.provide(model(server.url)))
      )
      assert.deepStrictEqual(reported, [
        { inputTokens: 50, outputTokens: 9, costUsd: (40 * 1000 + 10 * 100 + 9 * 2000) / 1_000_000 }
      ])
    }).pipe(Effect.scoped)
  )

  it.effect(
    "a server that sends no usage: a stream or a whole answer reports the estimate at 4 characters a token, once under Llm.layer",
    () =>
      Effect.gen(function* () {
        const text = "an answer without usage"
        const stream = FakeModelServer.openAiStream({ text, inputTokens: 50, outputTokens: 9 })
        const server = yield* FakeModelServer.make((_, call) =>
          call % 2 === 1 && stream._tag === "Sse"
            ? { ...stream, events: stream.events.filter((event) => !event.data.includes('"usage"')) }
            : FakeModelServer.json({ id: "x", choices: [{ message: { content: text }, finish_reason: "stop" }] })
        )
        const prompt = Prompt.make("x")
        const inputTokens = Math.ceil(JSON.stringify(prompt.content).length / 4)
        const outputTokens = Math.ceil(text.length / 4)
        const estimate = { inputTokens, outputTokens, costUsd: (inputTokens * 1000 + outputTokens * 2000) / 1_000_000 }
        for (const layer of [
          model(server.url),
          Llm.layer({ estimateTokens: () => 5000 }).pipe(Layer.provide(model(server.url)))
        ]) {
          const { value: parts, reported } = yield* collectUsage(
            LanguageModel.streamText({ prompt }).pipe(Stream.runCollect, Effect.provide(layer))
          )
          const finish = parts.find((part) => part.type === "finish")
          assert.strictEqual(finish?.type === "finish" && finish.usage.inputTokens.total, undefined)
          assert.strictEqual(finish?.type === "finish" && finish.usage.outputTokens.total, undefined)
          assert.deepStrictEqual(reported, [estimate])
          const whole = yield* collectUsage(LanguageModel.generateText({ prompt }).pipe(Effect.provide(layer)))
          assert.strictEqual(whole.value.text, text)
          assert.isUndefined(whole.value.usage.inputTokens.total)
          assert.deepStrictEqual(whole.reported, [estimate])
        }
      }).pipe(Effect.scoped)
  )

  it.effect("under Llm.layer a cut stream is reported once, by the provider", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "a long answer that will be cut", outputTokens: 9 }, 3)
      )
      const prompt = Prompt.make("x")
      const { reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt }).pipe(
          Stream.runDrain,
          Effect.flip,
          Effect.provide(Llm.layer({ estimateTokens: () => 5000 }).pipe(Layer.provide(model(server.url))))
        )
      )
      const inputTokens = Math.ceil(JSON.stringify(prompt.content).length / 4)
      assert.deepStrictEqual(reported, [
        { inputTokens, outputTokens: 2, costUsd: (inputTokens * 1000 + 2 * 2000) / 1_000_000 }
      ])
    }).pipe(Effect.scoped)
  )

  it.effect("a stream cut mid-way counts towards the run's budget", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.openAiStream({ text: "a long answer that will be cut", outputTokens: 9 }, 3)
      )
      const agent = Agent.make("streams", {
        run: LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runDrain,
          Effect.ignore,
          Effect.provide(model(server.url))
        )
      })
      const result = yield* Corral.run([agent], { budget: { tokens: 2 } })
      const outcome = result.outcomes[0]!
      assert.strictEqual(outcome._tag, "Interrupted")
      assert.isTrue(outcome._tag === "Interrupted" && outcome.crossedBudget)
      assert.isAbove(outcome.usage.outputTokens, 0)
      assert.strictEqual(result.stopped?._tag, "BudgetExceeded")
    }).pipe(Effect.scoped)
  )

  it.effect(
    "a stream that ends cleanly without [DONE] is truncated: a retryable NetworkError names the missing event",
    () =>
      Effect.gen(function* () {
        const whole = FakeModelServer.openAiStream({ text: "abc" })
        const server = yield* FakeModelServer.make(() =>
          whole._tag === "Sse" ? { ...whole, events: whole.events.slice(0, -1) } : whole
        )
        const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runDrain,
          Effect.flip,
          Effect.provide(model(server.url))
        )
        assert.strictEqual(error.reason._tag, "NetworkError")
        assert.include(error.message, 'ended before its "[DONE]" event')
      }).pipe(Effect.scoped)
  )

  it.live("no response within the timeout and a refused connection are retryable network errors", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.hang)
      const slow = yield* failureOf(
        LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url, { timeout: "300 millis" })))
      )
      assert.strictEqual(slow._tag, "NetworkError")
      assert.isTrue(slow.isRetryable)
      assert.include(slow.message, "no response within 300 ms")
      const closed = yield* FakeModelServer.closedPort
      const refused = yield* failureOf(LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(closed))))
      assert.strictEqual(refused._tag, "NetworkError")
      assert.isTrue(refused.isRetryable)
    }).pipe(Effect.scoped)
  )

  it.live("past the timeout the request is aborted: the socket to a server that never answers closes", () =>
    Effect.gen(function* () {
      for (const call of [
        LanguageModel.generateText({ prompt: "x" }),
        Stream.runDrain(LanguageModel.streamText({ prompt: "x" }))
      ]) {
        const server = yield* silentServer
        const error = yield* failureOf(call.pipe(Effect.provide(model(server.url, { timeout: "200 millis" }))))
        assert.strictEqual(error._tag, "NetworkError")
        assert.include(error.message, "no response within 200 ms")
        yield* server.closed
        assert.strictEqual(server.requests(), 1)
      }
    }).pipe(Effect.scoped)
  )

  it.live(
    "a stream that stalls after its headers or mid-way fails past idleTimeout, its request aborted",
    () =>
      Effect.gen(function* () {
        const delta = deltaEvent("par")
        for (const first of ["", delta]) {
          const server = yield* stallingServer(first)
          const seen: Array<string> = []
          const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
            Stream.runForEach((part) => Effect.sync(() => part.type === "text-delta" && seen.push(part.delta))),
            Effect.flip,
            Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "200 millis" }))
          )
          assert.deepStrictEqual(seen, first === "" ? [] : ["par"])
          assert.strictEqual(error.reason._tag, "NetworkError")
          assert.isTrue(error.reason.isRetryable)
          assert.include(
            error.message,
            `test-model at ${server.url}/v1/chat/completions sent no event for 200 ms (idleTimeout; SSE comments do not count)`
          )
          yield* server.closed
        }
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "keep-alive comments alone do not hold a stream open past idleTimeout, before or after its first event",
    () =>
      Effect.gen(function* () {
        for (const first of ["", deltaEvent("par")]) {
          const server = yield* keepAliveServer(first, 40)
          const seen: Array<string> = []
          const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
            Stream.runForEach((part) => Effect.sync(() => part.type === "text-delta" && seen.push(part.delta))),
            Effect.flip,
            Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "300 millis" })),
            Effect.timeoutOrElse({
              duration: "10 seconds",
              orElse: () => Effect.die(`the stream was still open after 10 s and ${server.pings()} pings`)
            })
          )
          assert.deepStrictEqual(seen, first === "" ? [] : ["par"])
          assert.strictEqual(error.reason._tag, "NetworkError")
          assert.isTrue(error.reason.isRetryable)
          assert.include(
            error.message,
            `test-model at ${server.url}/v1/chat/completions sent no event for 300 ms (idleTimeout; SSE comments do not count)`
          )
          assert.isAtLeast(server.pings(), 3)
          yield* server.closed
        }
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "without idleTimeout, a stalled stream fails past timeout",
    () =>
      Effect.gen(function* () {
        const server = yield* stallingServer("")
        const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runDrain,
          Effect.flip,
          Effect.provide(model(`${server.url}/v1`, { timeout: "300 millis" }))
        )
        assert.strictEqual(error.reason._tag, "NetworkError")
        assert.include(error.message, "sent no event for 300 ms (idleTimeout; SSE comments do not count)")
      }).pipe(Effect.scoped),
    20_000
  )

  it.live("in a run, an agent's retry after a stalled stream sends a new request; the stalled one is aborted", () =>
    Effect.gen(function* () {
      const server = yield* stallingServer(deltaEvent("par"), `${deltaEvent("whole")}data: [DONE]\n\n`)
      const agent = Agent.make("stream", {
        retry: Schedule.recurs(1),
        run: LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runFold(
            () => "",
            (text, part) => (part.type === "text-delta" ? text + part.delta : text)
          ),
          Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "200 millis" }))
        )
      })
      const outcome = (yield* Corral.run([agent])).outcomes[0]!
      assert.strictEqual(outcome._tag, "Succeeded")
      assert.strictEqual(outcome._tag === "Succeeded" && outcome.value, "whole")
      assert.strictEqual(outcome.attempts, 2)
      assert.strictEqual(server.requests(), 2)
      yield* server.closed
    }).pipe(Effect.scoped)
  )

  it.effect(
    "idleTimeout counts the server's silence only: not a steady stream's total, not a slow consumer's time",
    () =>
      Effect.gen(function* () {
        const server = yield* steppedServer
        const deltas = yield* Queue.unbounded<string>()
        const done = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runForEach((part) =>
            part.type === "text-delta"
              ? Effect.andThen(TestClock.adjust("1 second"), Queue.offer(deltas, part.delta))
              : Effect.void
          ),
          Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "200 millis" })),
          Effect.forkChild
        )
        for (const word of ["a", "b", "c", "d", "e"]) {
          yield* TestClock.adjust("150 millis")
          yield* server.write(deltaEvent(word))
          const next = yield* Effect.raceFirst(Queue.take(deltas), Effect.as(Fiber.join(done), "(the stream ended)"))
          assert.strictEqual(next, word)
        }
        yield* server.write("data: [DONE]\n\n")
        yield* server.end
        yield* Fiber.join(done)
      }).pipe(Effect.scoped)
  )

  it.effect("idleTimeout: Infinity waits on a stalled stream; interrupting the stream aborts its request", () =>
    Effect.gen(function* () {
      for (const idleTimeout of ["200 millis", Number.POSITIVE_INFINITY] as const) {
        const server = yield* steppedServer
        const deltas = yield* Queue.unbounded<string>()
        const stream = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runForEach((part) => (part.type === "text-delta" ? Queue.offer(deltas, part.delta) : Effect.void)),
          Effect.provide(model(`${server.url}/v1`, { timeout: "200 millis", idleTimeout })),
          Effect.forkChild
        )
        yield* server.write(deltaEvent("par"))
        assert.strictEqual(yield* Queue.take(deltas), "par")
        for (let hour = 0; hour < 5; hour++) {
          yield* Effect.yieldNow
          yield* TestClock.adjust("1 hour")
        }
        const exit = stream.pollUnsafe()
        if (idleTimeout === Number.POSITIVE_INFINITY) {
          assert.isUndefined(exit)
          yield* Fiber.interrupt(stream)
        } else {
          assert.isDefined(exit)
          assert.include(String(exit), "sent no event for 200 ms (idleTimeout; SSE comments do not count)")
        }
        yield* server.closed
      }
    }).pipe(Effect.scoped)
  )

  it.live("in a run, a 429 pauses the run's bucket and the agent's retry succeeds; usage lands on its outcome", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.rateLimited(0)
          : FakeModelServer.openAi({ text: "ok", inputTokens: 3, outputTokens: 2 })
      )
      const agent = Agent.make("ask", {
        rateLimit: "openai",
        run: LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.map((response) => response.text),
          Effect.provide(model(server.url))
        )
      })
      const result = yield* Corral.run([agent], { rateLimits: { openai: { limit: 100, interval: "1 second" } } })
      const outcome = result.outcomes[0]!
      assert.strictEqual(outcome._tag, "Succeeded")
      assert.strictEqual(outcome._tag === "Succeeded" && outcome.value, "ok")
      assert.strictEqual(outcome.attempts, 2)
      assert.deepStrictEqual(outcome.usage, { inputTokens: 3, outputTokens: 2, costUsd: 0.007 })
      assert.strictEqual(server.requests.length, 2)
    }).pipe(Effect.scoped)
  )
  it.effect(
    "layerConfig takes an empty or blank OPENAI_BASE_URL as unset and trims a set one, as OpenAI's SDK does",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: "hi" }))
        const fromEnv = (value: string, client: Layer.Layer<HttpClient.HttpClient>) =>
          OpenAiCompat.layerConfig({ model: "test-model" }).pipe(
            Layer.provide(client),
            Layer.provide(
              ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_BASE_URL: value, OPENAI_API_KEY: "sk-env" }))
            )
          )
        const sent: Array<string> = []
        for (const value of ["", "  "]) {
          const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
            Effect.provide(fromEnv(value, redirectedClient(server.url, sent)))
          )
          assert.strictEqual(response.text, "hi")
        }
        assert.deepStrictEqual(sent, [
          "https://api.openai.com/v1/chat/completions",
          "https://api.openai.com/v1/chat/completions"
        ])
        const trimmed = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(fromEnv(` ${server.url}/v1 `, FetchHttpClient.layer))
        )
        assert.strictEqual(trimmed.text, "hi")
        assert.strictEqual(server.requests.at(-1)!.path, "/v1/chat/completions")
      }).pipe(Effect.scoped)
  )
  it.effect("layerConfig refuses an OPENAI_BASE_URL that is not an http(s) URL, naming the variable", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: "hi" }))
      for (const value of [
        "not a url",
        "ftp://127.0.0.1/v1",
        "localhost:11434/v1",
        "127.0.0.1:11434/v1",
        "http://",
        `${server.url}/v1#section`,
        "https://api.openai.com/v1#"
      ]) {
        const env = ConfigProvider.fromEnvRecord({ OPENAI_BASE_URL: value, OPENAI_API_KEY: "sk-env" })
        const error = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(
            OpenAiCompat.layerConfig({ model: "test-model" }).pipe(
              Layer.provide(redirectedClient(server.url, [])),
              Layer.provide(ConfigProvider.layer(env))
            )
          ),
          Effect.flip
        )
        assert.instanceOf(error, OpenAiCompat.InvalidBaseUrl)
        assert.strictEqual(error.variable, "OPENAI_BASE_URL")
        assert.strictEqual(error.value, value)
        assert.strictEqual(
          error.message,
          `OPENAI_BASE_URL is ${JSON.stringify(value)}: expected an http(s) URL without a fragment, such as https://api.openai.com/v1 (unset or empty for that default)`
        )
      }
      assert.strictEqual(server.requests.length, 0)
    }).pipe(Effect.scoped)
  )
  it.effect("layer and layerConfig refuse a baseUrl option that is not an http(s) URL, naming the option", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: "hi" }))
      const env = ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_BASE_URL: `${server.url}/v1` }))
      for (const value of [
        "localhost:8080/v1",
        "127.0.0.1:11434/v1",
        "not a url",
        "ftp://127.0.0.1/v1",
        "/v1",
        "",
        `${server.url}/v1#section`,
        `${server.url}/v1?api-version=1#`
      ]) {
        for (const layer of [
          OpenAiCompat.layer({ model: "test-model", baseUrl: value }),
          OpenAiCompat.layerConfig({ model: "test-model", baseUrl: value }).pipe(Layer.provide(env))
        ]) {
          const error = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
            Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer))),
            Effect.flip
          )
          assert.instanceOf(error, OpenAiCompat.InvalidBaseUrl)
          assert.strictEqual(error.option, "baseUrl")
          assert.isUndefined(error.variable)
          assert.strictEqual(error.value, value)
          assert.strictEqual(
            error.message,
            `OpenAiCompat option baseUrl is ${JSON.stringify(value)}: expected an http(s) URL without a fragment, such as https://api.openai.com/v1 (left out for that default)`
          )
        }
      }
      assert.strictEqual(server.requests.length, 0)
    }).pipe(Effect.scoped)
  )
  it.effect("layer and layerConfig take a baseUrl with a proxy's path prefix, with or without a trailing slash", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: "hi" }))
      const env = ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_BASE_URL: "https://api.example.com/v1" }))
      for (const baseUrl of [`${server.url}/openai/v1`, `${server.url}/openai/v1/`]) {
        for (const layer of [
          OpenAiCompat.layer({ model: "test-model", baseUrl }),
          OpenAiCompat.layerConfig({ model: "test-model", baseUrl }).pipe(Layer.provide(env))
        ]) {
          const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
            Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer)))
          )
          assert.strictEqual(response.text, "hi")
        }
      }
      assert.deepStrictEqual(
        server.requests.map((request) => request.path),
        Array.from({ length: 4 }, () => "/openai/v1/chat/completions")
      )
    }).pipe(Effect.scoped)
  )
  it.effect("a baseUrl option or OPENAI_BASE_URL with a query keeps it, the path going before it", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.openAi({ text: "hi" }))
      const deployment = `${server.url}/openai/deployments/gpt`
      const env = (value: string) => ConfigProvider.layer(ConfigProvider.fromEnvRecord({ OPENAI_BASE_URL: value }))
      for (const baseUrl of [`${deployment}?api-version=2024-06-01`, ` ${deployment}/?api-version=2024-06-01 `]) {
        for (const layer of [
          OpenAiCompat.layer({ model: "test-model", baseUrl }),
          OpenAiCompat.layerConfig({ model: "test-model", baseUrl }).pipe(
            Layer.provide(env("https://api.example.com"))
          ),
          OpenAiCompat.layerConfig({ model: "test-model" }).pipe(Layer.provide(env(baseUrl)))
        ]) {
          const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
            Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer)))
          )
          assert.strictEqual(response.text, "hi")
        }
      }
      assert.deepStrictEqual(
        server.requests.map((request) => request.path),
        Array.from({ length: 6 }, () => "/openai/deployments/gpt/chat/completions?api-version=2024-06-01")
      )
    }).pipe(Effect.scoped)
  )
})
