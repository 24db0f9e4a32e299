import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { type LanguageModel, Tool, Toolkit } from "effect/ai"
import * as ModelHttp from "../../src/internal/modelHttp.ts"
import * as Pricing from "../../src/Pricing.ts"
import * as Usage from "../../src/Usage.ts"

const setup = (model: string) =>
  ({ options: { model }, prices: Pricing.defaults }) as ModelHttp.Setup<ModelHttp.CommonOptions>

const finishWith = (tokens: Pricing.Tokens, report?: boolean) =>
  Effect.gen(function* () {
    const reported: Array<Partial<Usage.Usage>> = []
    const part = yield* ModelHttp.finish(setup("gpt-4o-mini"), "stop", tokens, report).pipe(
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

  it.effect("finish without a reported usage (the server sent none) reports nothing", () =>
    Effect.gen(function* () {
      const { part, reported } = yield* finishWith({ inputTokens: 0, outputTokens: 0 }, false)
      assert.deepStrictEqual(reported, [])
      assert.deepStrictEqual(part.metadata, { corral: { costUsd: 0, reported: true } })
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
})
