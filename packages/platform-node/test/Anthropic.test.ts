import { Anthropic, Llm, RateLimiter } from "@corral/core"
import * as FakeModelServer from "@corral/platform-node/FakeModelServer"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Redacted, Schema, Stream } from "effect"
import { LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
import { FetchHttpClient } from "effect/http"
import { collectUsage, redirectedClient, streamed } from "./fixtures/models.ts"
import { keepAliveServer, stallingServer } from "./fixtures/stallingServer.ts"

const model = (url: string, options: Partial<Anthropic.Options> = {}) =>
  Anthropic.layer({
    model: "claude-test",
    baseUrl: url,
    apiKey: Redacted.make("sk-ant-secret"),
    prices: {
      "claude-test": {
        inputPerMillion: 1000,
        outputPerMillion: 5000,
        cachedInputPerMillion: 100,
        cacheWritePerMillion: 1250
      }
    },
    ...options
  }).pipe(Layer.orDie, Layer.provide(FetchHttpClient.layer))

const Lookup = Tool.make("lookup", {
  description: "Look a word up",
  parameters: Schema.Struct({ word: Schema.String }),
  success: Schema.String
})
const Words = Toolkit.make(Lookup)
const wordHandlers = Words.toLayer({ lookup: ({ word }) => Effect.succeed(`${word}: a small animal`) })

describe("Anthropic", () => {
  it.effect(
    "generates text with x-api-key, anthropic-version and a top-level system prompt; usage counts cache reads",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeModelServer.make(() =>
          FakeModelServer.anthropic({ text: "Bonjour", inputTokens: 1000, outputTokens: 200, cachedInputTokens: 600 })
        )
        const prompt = Prompt.make([
          { role: "system", content: "Answer in French." },
          { role: "user", content: "Say hello" }
        ])
        const { value, reported } = yield* collectUsage(
          LanguageModel.generateText({ prompt }).pipe(Effect.provide(model(server.url)))
        )
        assert.strictEqual(value.text, "Bonjour")
        assert.strictEqual(value.finishReason, "stop")
        assert.strictEqual(value.usage.inputTokens.total, 1000)
        assert.strictEqual(value.usage.inputTokens.cacheRead, 600)
        // 400 fresh × $1000/M + 600 cached × $100/M + 200 out × $5000/M = 0.4 + 0.06 + 1.0
        assert.deepStrictEqual(reported, [{ inputTokens: 1000, outputTokens: 200, costUsd: 1.46 }])
        const request = server.requests[0]!
        assert.strictEqual(request.path, "/messages")
        assert.strictEqual(request.headers["x-api-key"], "sk-ant-secret")
        assert.strictEqual(request.headers["anthropic-version"], "2023-06-01")
        assert.strictEqual(request.body.system, "Answer in French.")
        assert.strictEqual(request.body.max_tokens, 4096)
        assert.deepStrictEqual(request.body.messages, [
          { role: "user", content: [{ type: "text", text: "Say hello" }] }
        ])
      }).pipe(Effect.scoped)
  )

  it.effect("tool use: the call is resolved and its result goes back as a tool_result in a user turn", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.anthropic({ toolCalls: [{ id: "toolu_1", name: "lookup", params: { word: "vole" } }] })
          : FakeModelServer.anthropic({ text: "A vole is a small animal." })
      )
      const generate = (prompt: Prompt.RawInput) =>
        LanguageModel.generateText({ prompt, toolkit: Words, toolChoice: "required" }).pipe(
          Effect.provide(model(server.url))
        )
      const first = yield* generate("What is a vole?")
      assert.strictEqual(first.finishReason, "tool-calls")
      assert.deepStrictEqual(
        first.toolResults.map((result) => result.result),
        ["vole: a small animal"]
      )
      const sent = server.requests[0]!.body
      assert.deepStrictEqual(sent.tool_choice, { type: "any" })
      assert.strictEqual(sent.tools[0].name, "lookup")
      assert.strictEqual(sent.tools[0].input_schema.properties.word.type, "string")
      const second = yield* generate(
        Prompt.concat(Prompt.make("What is a vole?"), Prompt.fromResponseParts(first.content))
      )
      assert.strictEqual(second.text, "A vole is a small animal.")
      const messages = server.requests[1]!.body.messages
      assert.deepStrictEqual(messages[1], {
        role: "assistant",
        content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: { word: "vole" } }]
      })
      assert.deepStrictEqual(messages[2], {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "vole: a small animal" }]
      })
    }).pipe(Effect.scoped, Effect.provide(wordHandlers))
  )

  it.effect("streams text and tool input deltas over SSE; usage combines message_start and message_delta", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.anthropicStream({
          text: "Let me check.",
          toolCalls: [{ id: "toolu_2", name: "lookup", params: { word: "stoat" } }],
          inputTokens: 40,
          outputTokens: 30
        })
      )
      const { value: parts, reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt: "go", toolkit: Words, disableToolCallResolution: true }).pipe(
          Stream.runCollect,
          Effect.provide(model(server.url))
        )
      )
      assert.deepStrictEqual(streamed(parts), {
        text: "Let me check.",
        call: ["toolu_2", { word: "stoat" }],
        finishReason: "tool-calls"
      })
      assert.deepStrictEqual(reported, [{ inputTokens: 40, outputTokens: 30, costUsd: 0.19 }])
    }).pipe(Effect.scoped, Effect.provide(wordHandlers))
  )

  it.effect("generateObject forces a tool with the object's schema and decodes its input", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.anthropic({ toolCalls: [{ id: "toolu_3", name: "Person", params: { name: "Ada", age: 36 } }] })
      )
      const response = yield* LanguageModel.generateObject({
        prompt: "Who wrote the first program?",
        objectName: "Person",
        schema: Schema.Struct({ name: Schema.String, age: Schema.Number })
      }).pipe(Effect.provide(model(server.url)))
      assert.deepStrictEqual(response.value, { name: "Ada", age: 36 })
      assert.deepStrictEqual(server.requests[0]!.body.tool_choice, { type: "tool", name: "Person" })
    }).pipe(Effect.scoped)
  )

  it.effect("529 overloaded with Retry-After is a retryable RateLimitError corral pauses on", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.rateLimited(4, 529))
      const error = yield* Effect.flip(
        LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      )
      assert.strictEqual(error.reason._tag, "RateLimitError")
      assert.isTrue(error.isRetryable)
      assert.strictEqual(RateLimiter.retryAfterOf(error), 4000)
      assert.strictEqual(Llm.toRateLimited(error, "anthropic")?.retryAfter, 4000)
      assert.notInclude(JSON.stringify(error), "sk-ant-secret")
    }).pipe(Effect.scoped)
  )

  it.effect("an error event in the stream (overloaded) fails the stream with a RateLimitError", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => ({
        _tag: "Sse",
        events: [
          {
            event: "error",
            data: JSON.stringify({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
          }
        ]
      }))
      const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
        Stream.runDrain,
        Effect.flip,
        Effect.provide(model(server.url, { defaultRetryAfter: "2 seconds" }))
      )
      assert.strictEqual(error.reason._tag, "RateLimitError")
      assert.strictEqual(RateLimiter.retryAfterOf(error), 2000)
    }).pipe(Effect.scoped)
  )

  it.live(
    "keep-alive comments alone do not hold a stream open past idleTimeout",
    () =>
      Effect.gen(function* () {
        const server = yield* keepAliveServer("", 40)
        const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
          Stream.runDrain,
          Effect.flip,
          Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "300 millis" })),
          Effect.timeoutOrElse({
            duration: "10 seconds",
            orElse: () => Effect.die(`the stream was still open after 10 s and ${server.pings()} pings`)
          })
        )
        assert.strictEqual(error.reason._tag, "NetworkError")
        assert.include(
          error.message,
          `claude-test at ${server.url}/v1/messages sent no event for 300 ms (idleTimeout; SSE comments do not count)`
        )
        assert.isAtLeast(server.pings(), 3)
        yield* server.closed
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "a stream that stalls after its headers or after a ping fails past idleTimeout, its request aborted",
    () =>
      Effect.gen(function* () {
        for (const first of ["", `event: ping\ndata: {"type":"ping"}\n\n`]) {
          const server = yield* stallingServer(first)
          const error = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
            Stream.runDrain,
            Effect.flip,
            Effect.provide(model(`${server.url}/v1`, { timeout: "1 minute", idleTimeout: "200 millis" }))
          )
          assert.strictEqual(error.reason._tag, "NetworkError")
          assert.isTrue(error.reason.isRetryable)
          assert.include(
            error.message,
            `claude-test at ${server.url}/v1/messages sent no event for 200 ms (idleTimeout; SSE comments do not count)`
          )
          yield* server.closed
        }
      }).pipe(Effect.scoped),
    20_000
  )

  it.effect("malformed JSON, a cut stream and a 400 give typed errors; only the cut stream is retryable", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make((_, call) =>
        call === 1
          ? FakeModelServer.raw("<html>bad gateway</html>")
          : call === 2
            ? FakeModelServer.anthropicStream({ text: "partial answer here" }, 3)
            : FakeModelServer.failure(400, "messages: at least one message is required")
      )
      const malformed = yield* Effect.flip(
        LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      )
      assert.strictEqual(malformed.reason._tag, "InvalidResponseError")
      assert.include(malformed.message, "not valid JSON")
      assert.include(malformed.message, "<html>bad gateway</html>")
      const cut = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
        Stream.runDrain,
        Effect.flip,
        Effect.provide(model(server.url))
      )
      assert.strictEqual(cut.reason._tag, "NetworkError")
      assert.isTrue(cut.isRetryable)
      const bad = yield* Effect.flip(
        LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model(server.url)))
      )
      assert.strictEqual(bad.reason._tag, "InvalidRequestError")
      assert.isFalse(bad.isRetryable)
      assert.include(bad.message, "at least one message is required")
    }).pipe(Effect.scoped)
  )
  it.effect("layerConfig reads ANTHROPIC_BASE_URL as Anthropic's SDK and Claude Code do: the URL before /v1", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      const paths: Array<string> = []
      for (const baseUrl of [server.url, `${server.url}/`, `${server.url}/v1`, `${server.url}/v1/`]) {
        const env = ConfigProvider.fromEnvRecord({ ANTHROPIC_BASE_URL: baseUrl, ANTHROPIC_API_KEY: "sk-ant-env" })
        const model = Anthropic.layerConfig({ model: "claude-test" }).pipe(
          Layer.provide(FetchHttpClient.layer),
          Layer.provide(ConfigProvider.layer(env))
        )
        const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model))
        assert.strictEqual(response.text, "hi")
        paths.push(server.requests.at(-1)!.path)
      }
      assert.deepStrictEqual(paths, ["/v1/messages", "/v1/messages", "/v1/messages", "/v1/messages"])
      assert.strictEqual(server.requests.at(-1)!.headers["x-api-key"], "sk-ant-env")
    }).pipe(Effect.scoped)
  )
  it.effect(
    "a stream cut mid-way reports message_start's exact input and its output at 4 characters a token, priced",
    () =>
      Effect.gen(function* () {
        const server = yield* FakeModelServer.make(() =>
          FakeModelServer.anthropicStream(
            { text: "partial answer here", inputTokens: 1000, cachedInputTokens: 600, outputTokens: 9 },
            4
          )
        )
        const prompt = Prompt.make("x")
        let text = ""
        const { reported } = yield* collectUsage(
          LanguageModel.streamText({ prompt }).pipe(
            Stream.runForEach((part) => Effect.sync(() => part.type === "text-delta" && (text += part.delta))),
            Effect.flip,
            Effect.provide(model(server.url))
          )
        )
        assert.isAbove(text.length, 0)
        const outputTokens = Math.ceil(text.length / 4)
        assert.deepStrictEqual(reported, [
          { inputTokens: 1000, outputTokens, costUsd: (400 * 1000 + 600 * 100 + outputTokens * 5000) / 1_000_000 }
        ])
      }).pipe(Effect.scoped)
  )
  it.effect("a stream cut after its message_delta reports the exact input and output counts, priced", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() =>
        FakeModelServer.anthropicStream({ text: "abcd", inputTokens: 1000, cachedInputTokens: 600, outputTokens: 9 }, 5)
      )
      const { reported } = yield* collectUsage(
        LanguageModel.streamText({ prompt: "x" }).pipe(Stream.runDrain, Effect.flip, Effect.provide(model(server.url)))
      )
      assert.deepStrictEqual(reported, [
        { inputTokens: 1000, outputTokens: 9, costUsd: (400 * 1000 + 600 * 100 + 9 * 5000) / 1_000_000 }
      ])
    }).pipe(Effect.scoped)
  )
  it.effect(
    "a stream whose message_delta has no usage reports message_start's input and its output at 4 characters a token",
    () =>
      Effect.gen(function* () {
        const text = "an answer without output usage"
        const stream = FakeModelServer.anthropicStream({
          text,
          inputTokens: 1000,
          cachedInputTokens: 600,
          outputTokens: 9
        })
        const server = yield* FakeModelServer.make(() =>
          stream._tag === "Sse"
            ? {
                ...stream,
                events: stream.events.map((event) =>
                  event.event === "message_delta"
                    ? { ...event, data: JSON.stringify({ type: "message_delta", delta: { stop_reason: "end_turn" } }) }
                    : event
                )
              }
            : stream
        )
        for (const layer of [
          model(server.url),
          Llm.layer({ estimateTokens: () => 5000 }).pipe(Layer.provide(model(server.url)))
        ]) {
          const { value: parts, reported } = yield* collectUsage(
            LanguageModel.streamText({ prompt: "x" }).pipe(Stream.runCollect, Effect.provide(layer))
          )
          assert.strictEqual(streamed(parts).text, text)
          const finish = parts.find((part) => part.type === "finish")
          assert.strictEqual(finish?.type === "finish" && finish.usage.inputTokens.total, 1000)
          assert.strictEqual(finish?.type === "finish" && finish.usage.outputTokens.total, undefined)
          const outputTokens = Math.ceil(text.length / 4)
          assert.deepStrictEqual(reported, [
            { inputTokens: 1000, outputTokens, costUsd: (400 * 1000 + 600 * 100 + outputTokens * 5000) / 1_000_000 }
          ])
        }
      }).pipe(Effect.scoped)
  )
  it.effect(
    "a server that sends no usage at all: a stream or a whole answer reports the estimate at 4 characters a token",
    () =>
      Effect.gen(function* () {
        const text = "an answer without usage"
        const stream = FakeModelServer.anthropicStream({ text })
        const server = yield* FakeModelServer.make((_, call) =>
          call === 1 && stream._tag === "Sse"
            ? {
                ...stream,
                events: stream.events.map((event) => {
                  const data = JSON.parse(event.data)
                  delete data.usage
                  delete data.message?.usage
                  return { ...event, data: JSON.stringify(data) }
                })
              }
            : FakeModelServer.json({ id: "msg", content: [{ type: "text", text }], stop_reason: "end_turn" })
        )
        const prompt = Prompt.make("x")
        const inputTokens = Math.ceil(JSON.stringify(prompt.content).length / 4)
        const outputTokens = Math.ceil(text.length / 4)
        const estimate = { inputTokens, outputTokens, costUsd: (inputTokens * 1000 + outputTokens * 5000) / 1_000_000 }
        const streamedCall = yield* collectUsage(
          LanguageModel.streamText({ prompt }).pipe(Stream.runCollect, Effect.provide(model(server.url)))
        )
        assert.strictEqual(streamed(streamedCall.value).text, text)
        assert.deepStrictEqual(streamedCall.reported, [estimate])
        const whole = yield* collectUsage(
          LanguageModel.generateText({ prompt }).pipe(Effect.provide(model(server.url)))
        )
        assert.strictEqual(whole.value.text, text)
        assert.isUndefined(whole.value.usage.outputTokens.total)
        assert.deepStrictEqual(whole.reported, [estimate])
      }).pipe(Effect.scoped)
  )
  it.effect("layerConfig takes an empty or blank ANTHROPIC_BASE_URL as unset, as Anthropic's SDK does", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      const sent: Array<string> = []
      for (const value of ["", "  "]) {
        const env = ConfigProvider.fromEnvRecord({ ANTHROPIC_BASE_URL: value, ANTHROPIC_API_KEY: "sk-ant-env" })
        const model = Anthropic.layerConfig({ model: "claude-test" }).pipe(
          Layer.provide(redirectedClient(server.url, sent)),
          Layer.provide(ConfigProvider.layer(env))
        )
        const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(Effect.provide(model))
        assert.strictEqual(response.text, "hi")
      }
      assert.deepStrictEqual(sent, ["https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/messages"])
    }).pipe(Effect.scoped)
  )
  it.effect("layerConfig refuses an ANTHROPIC_BASE_URL that is not an http(s) URL, naming the variable", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      for (const value of ["/v1", "api.anthropic.com", "file:///tmp/x", `${server.url}#v1`, `${server.url}/v1/#`]) {
        const env = ConfigProvider.fromEnvRecord({ ANTHROPIC_BASE_URL: value, ANTHROPIC_API_KEY: "sk-ant-env" })
        const error = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(
            Anthropic.layerConfig({ model: "claude-test" }).pipe(
              Layer.provide(redirectedClient(server.url, [])),
              Layer.provide(ConfigProvider.layer(env))
            )
          ),
          Effect.flip
        )
        assert.instanceOf(error, Anthropic.InvalidBaseUrl)
        assert.strictEqual(error.variable, "ANTHROPIC_BASE_URL")
        assert.strictEqual(
          error.message,
          `ANTHROPIC_BASE_URL is ${JSON.stringify(value)}: expected an http(s) URL without a fragment, such as https://api.anthropic.com (unset or empty for that default)`
        )
      }
      assert.strictEqual(server.requests.length, 0)
    }).pipe(Effect.scoped)
  )
  it.effect("layer and layerConfig refuse a baseUrl option that is not an http(s) URL, naming the option", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      const env = ConfigProvider.layer(ConfigProvider.fromEnvRecord({ ANTHROPIC_BASE_URL: server.url }))
      for (const value of ["api.anthropic.com", "/v1", "file:///tmp/x", " ", `${server.url}/v1#messages`]) {
        for (const layer of [
          Anthropic.layer({ model: "claude-test", baseUrl: value }),
          Anthropic.layerConfig({ model: "claude-test", baseUrl: value }).pipe(Layer.provide(env))
        ]) {
          const error = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
            Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer))),
            Effect.flip
          )
          assert.instanceOf(error, Anthropic.InvalidBaseUrl)
          assert.strictEqual(error.option, "baseUrl")
          assert.strictEqual(
            error.message,
            `Anthropic option baseUrl is ${JSON.stringify(value)}: expected an http(s) URL without a fragment, such as https://api.anthropic.com/v1 (left out for that default)`
          )
        }
      }
      assert.strictEqual(server.requests.length, 0)
    }).pipe(Effect.scoped)
  )
  it.effect("layer takes a baseUrl with a gateway's path prefix, with or without a trailing slash", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      for (const baseUrl of [`${server.url}/anthropic/v1`, `${server.url}/anthropic/v1/`]) {
        const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(Anthropic.layer({ model: "claude-test", baseUrl }).pipe(Layer.provide(FetchHttpClient.layer)))
        )
        assert.strictEqual(response.text, "hi")
      }
      assert.deepStrictEqual(
        server.requests.map((request) => request.path),
        ["/anthropic/v1/messages", "/anthropic/v1/messages"]
      )
    }).pipe(Effect.scoped)
  )
  it.effect("a baseUrl option or ANTHROPIC_BASE_URL with a query keeps it, the path going before it", () =>
    Effect.gen(function* () {
      const server = yield* FakeModelServer.make(() => FakeModelServer.anthropic({ text: "hi" }))
      const fromEnv = (value: string) =>
        Anthropic.layerConfig({ model: "claude-test" }).pipe(
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord({ ANTHROPIC_BASE_URL: value })))
        )
      for (const layer of [
        Anthropic.layer({ model: "claude-test", baseUrl: `${server.url}/gateway/v1?team=a` }),
        Anthropic.layer({ model: "claude-test", baseUrl: `${server.url}/gateway/v1/?team=a` }),
        fromEnv(`${server.url}/gateway?team=a`),
        fromEnv(`${server.url}/gateway/?team=a`),
        fromEnv(`${server.url}/gateway/v1?team=a`)
      ]) {
        const response = yield* LanguageModel.generateText({ prompt: "x" }).pipe(
          Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer)))
        )
        assert.strictEqual(response.text, "hi")
      }
      assert.deepStrictEqual(
        server.requests.map((request) => request.path),
        Array.from({ length: 5 }, () => "/gateway/v1/messages?team=a")
      )
    }).pipe(Effect.scoped)
  )
})
