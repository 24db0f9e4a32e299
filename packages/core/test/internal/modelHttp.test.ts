import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema, Stream } from "effect"
import { LanguageModel, Prompt, Tool, Toolkit } from "effect/ai"
import { HttpClient } from "effect/http"
import { TestClock } from "effect/testing"
import * as Anthropic from "../../src/Anthropic.ts"
import * as ModelHttp from "../../src/internal/modelHttp.ts"
import * as Pricing from "../../src/Pricing.ts"
import * as OpenAiCompat from "../../src/OpenAiCompat.ts"
import * as Usage from "../../src/Usage.ts"

const setup = (model: string) =>
  ({ options: { model }, prices: Pricing.defaults }) as ModelHttp.Setup<ModelHttp.CommonOptions>

/** An `HttpClient` that never answers, counting the requests it was sent and the ones interrupted. */
const silentClient = () => {
  const requests = { sent: 0, interrupted: 0 }
  const layer = Layer.succeed(
    HttpClient.HttpClient,
    HttpClient.make(() =>
      Effect.suspend(() => {
        requests.sent++
        return Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => requests.interrupted++)))
      })
    )
  )
  return { layer, requests }
}

const providers = [
  ["OpenAiCompat", OpenAiCompat.layer],
  ["Anthropic", Anthropic.layer]
] as const

const request = { prompt: Prompt.make("Say hello") } as LanguageModel.ProviderOptions

/** The finish part of a response the server counted as `tokens` (none: it sent no usage) after `received` characters. */
const finishWith = (tokens: Pricing.Tokens | undefined, received = 0) =>
  Effect.gen(function* () {
    const reported: Array<Partial<Usage.Usage>> = []
    const counted = ModelHttp.counted()
    if (tokens !== undefined) {
      const { outputTokens, ...input } = tokens
      counted.input = input
      counted.outputTokens = outputTokens
    }
    counted.received = received
    const part = yield* ModelHttp.finish(setup("gpt-4o-mini"), request, "stop", counted).pipe(
      Effect.provideService(Usage.Reporter, (usage) => reported.push(usage))
    )
    return { part, reported }
  })

describe("internal/modelHttp", () => {
  it.effect("finish reports the priced usage and returns it in the finish part, cache writes only when known", () =>
    Effect.gen(function* () {
      const tokens = { inputTokens: 1000, outputTokens: 200, cachedInputTokens: 400 }
      const { part, reported } = yield* finishWith(tokens)
      const priced = Pricing.usage(Pricing.defaults, "gpt-4o-mini", tokens)
      assert.deepStrictEqual(reported, [priced])
      assert.deepStrictEqual(part, {
        type: "finish",
        reason: "stop",
        usage: { inputTokens: { total: 1000, uncached: 600, cacheRead: 400 }, outputTokens: { total: 200 } },
        metadata: { corral: { costUsd: priced.costUsd, reported: true } }
      })
      const written = yield* finishWith({ ...tokens, cacheWriteTokens: 100 })
      assert.deepStrictEqual(written.part.usage.inputTokens, {
        total: 1000,
        uncached: 500,
        cacheRead: 400,
        cacheWrite: 100
      })
    })
  )

  it.effect(
    "finish without the server's counts reports the estimate at 4 characters a token and leaves them out of the part",
    () =>
      Effect.gen(function* () {
        const { part, reported } = yield* finishWith(undefined, 41)
        const tokens = { inputTokens: Math.ceil(JSON.stringify(request.prompt.content).length / 4), outputTokens: 11 }
        const priced = Pricing.usage(Pricing.defaults, "gpt-4o-mini", tokens)
        assert.isAbove(tokens.inputTokens, 0)
        assert.deepStrictEqual(reported, [priced])
        assert.deepStrictEqual(part.usage, { inputTokens: {}, outputTokens: {} })
        assert.deepStrictEqual(part.metadata, { corral: { costUsd: priced.costUsd, reported: true } })
      })
  )

  it.effect("offeredTools keeps user-defined tools, narrowed to oneOf", () =>
    Effect.gen(function* () {
      const make = (name: string) => Tool.make(name, { parameters: Schema.Struct({}) })
      const toolkit = Toolkit.make(make("a"), make("b"))
      const names = (toolChoice: LanguageModel.ToolChoice<string>) =>
        ModelHttp.offeredTools({
          tools: Object.values(toolkit.tools),
          toolChoice
        } as unknown as LanguageModel.ProviderOptions).map((tool) => tool.name)
      assert.deepStrictEqual(names("auto"), ["a", "b"])
      assert.deepStrictEqual(names({ oneOf: ["b"] }), ["b"])
    })
  )

  it("resultText passes strings through and encodes anything else as JSON", () => {
    assert.strictEqual(ModelHttp.resultText("done"), "done")
    assert.strictEqual(ModelHttp.resultText({ ok: true }), '{"ok":true}')
    assert.strictEqual(ModelHttp.resultText(undefined), "null")
  })

  for (const [name, layer] of providers) {
    it.effect(`${name}: past the timeout on the Clock, the request is interrupted and the call fails retryably`, () =>
      Effect.gen(function* () {
        const { layer: client, requests } = silentClient()
        const model = layer({ model: "m", timeout: "2 seconds" }).pipe(Layer.provide(client))
        const call = (effect: Effect.Effect<unknown, unknown, LanguageModel.LanguageModel>) =>
          Effect.forkChild(Effect.flip(Effect.provide(effect, model)))
        const generate = yield* call(LanguageModel.generateText({ prompt: "x" }))
        const stream = yield* call(Stream.runDrain(LanguageModel.streamText({ prompt: "x" })))
        yield* TestClock.adjust("1999 millis")
        assert.isUndefined(generate.pollUnsafe())
        assert.isUndefined(stream.pollUnsafe())
        assert.strictEqual(requests.interrupted, 0)
        yield* TestClock.adjust("1 millis")
        for (const fiber of [generate, stream]) {
          const error = (yield* Fiber.join(fiber)) as {
            reason: { _tag: string; isRetryable: boolean }
            message: string
          }
          assert.strictEqual(error.reason._tag, "NetworkError")
          assert.isTrue(error.reason.isRetryable)
          assert.include(error.message, "no response within 2000 ms")
        }
        assert.deepStrictEqual(requests, { sent: 2, interrupted: 2 })
      })
    )
  }
})
