import { Anthropic, Llm, OpenAiCompat } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { LanguageModel } from "effect/ai"
import { FetchHttpClient } from "effect/http"

const defectOf = <A, E>(exit: Exit.Exit<A, E>): unknown => {
  assert.isTrue(Exit.isFailure(exit), "expected the effect to die")
  if (Exit.isSuccess(exit)) return undefined
  const defect = exit.cause.reasons.find(Cause.isDieReason)
  assert.isDefined(defect, Cause.pretty(exit.cause))
  return defect?.defect
}

const built = (layer: Layer.Layer<LanguageModel.LanguageModel, unknown, never>) =>
  Effect.exit(Effect.provide(Effect.service(LanguageModel.LanguageModel), layer))

describe("model options a provider or Llm.layer cannot use", () => {
  it.effect("a provider's duration options: the layer dies with InvalidOption naming the provider and the option", () =>
    Effect.gen(function* () {
      const cases = [
        [
          OpenAiCompat.layer({ model: "m", timeout: "abc" as never }),
          'OpenAiCompat.layer timeout: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "abc"'
        ],
        [
          OpenAiCompat.layer({ model: "m", defaultRetryAfter: Number.NaN }),
          "OpenAiCompat.layer defaultRetryAfter: must be a number of milliseconds, got NaN"
        ],
        [
          Anthropic.layer({ model: "m", timeout: { second: 5 } as never }),
          'Anthropic.layer timeout: unknown duration field "second" (known: weeks, days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds)'
        ],
        [
          Anthropic.layer({ model: "m", idleTimeout: "soon" as never }),
          'Anthropic.layer idleTimeout: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [
          Anthropic.layer({ model: "m", maxTokens: 0 }),
          "Anthropic.layer maxTokens: must be a whole number of at least 1, got 0"
        ]
      ] as const
      for (const [layer, message] of cases) {
        const defect = defectOf(yield* built(layer.pipe(Layer.provide(FetchHttpClient.layer))))
        assert.instanceOf(defect, OpenAiCompat.InvalidOption)
        assert.strictEqual((defect as Error).message, message)
      }
      assert.strictEqual(Anthropic.InvalidOption, OpenAiCompat.InvalidOption)
    })
  )

  it.effect(
    "Llm.layer's maxAttempts and defaultRetryAfter: the layer dies with Llm.InvalidOption naming the option",
    () =>
      Effect.gen(function* () {
        const cases = [
          [{ maxAttempts: Number.NaN }, "Llm.layer maxAttempts: must be a whole number of at least 1, got NaN"],
          [{ maxAttempts: 0 }, "Llm.layer maxAttempts: must be a whole number of at least 1, got 0"],
          [
            { defaultRetryAfter: "soon" as never },
            'Llm.layer defaultRetryAfter: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
          ]
        ] as const
        for (const [options, message] of cases) {
          const defect = defectOf(yield* built(Llm.layer(options).pipe(Layer.provide(Llm.scripted([{ text: "x" }])))))
          assert.instanceOf(defect, Llm.InvalidOption)
          assert.strictEqual((defect as Error).message, message)
        }
      })
  )

  it.effect(
    "Llm.scripted replies with a latency or retryAfter it cannot use: the call dies with Llm.InvalidOption",
    () =>
      Effect.gen(function* () {
        const cases = [
          [
            { latency: "soon" as never },
            'Llm.scripted latency: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
          ],
          [
            { latency: { seconds: true } as never },
            "Llm.scripted latency: duration field seconds must be a number, got boolean"
          ],
          [
            { rateLimited: { retryAfter: { milliseconds: "5" } as never } },
            "Llm.scripted rateLimited.retryAfter: duration field milliseconds must be a number, got string"
          ],
          [{ rateLimited: { retryAfter: -1 } }, "Llm.scripted rateLimited.retryAfter: must not be negative, got -1"]
        ] as const
        for (const [reply, message] of cases) {
          const call = LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(Llm.scripted([reply])))
          const defect = defectOf(yield* Effect.exit(call))
          assert.instanceOf(defect, Llm.InvalidOption, JSON.stringify(reply))
          assert.strictEqual((defect as Error).message, message)
        }
      })
  )

  it.effect("Llm.wrap with options it cannot use throws Llm.InvalidOption (it is a constructor)", () =>
    Effect.gen(function* () {
      const model = yield* Effect.provide(Effect.service(LanguageModel.LanguageModel), Llm.scripted([{ text: "x" }]))
      const thrown = (() => {
        try {
          Llm.wrap(model, { maxAttempts: -1 })
        } catch (error) {
          return error
        }
      })()
      assert.instanceOf(thrown, Llm.InvalidOption)
      assert.strictEqual(
        (thrown as Error).message,
        "Llm.wrap maxAttempts: must be a whole number of at least 1, got -1"
      )
    })
  )

  it.effect("options it can use build as before", () =>
    Effect.gen(function* () {
      const layers = [
        OpenAiCompat.layer({ model: "m", timeout: "5 seconds", defaultRetryAfter: 0 }),
        Anthropic.layer({ model: "m", timeout: 1000, maxTokens: 1 })
      ]
      for (const layer of layers)
        assert.isTrue(Exit.isSuccess(yield* built(layer.pipe(Layer.provide(FetchHttpClient.layer)))))
      const llm = Llm.layer({ maxAttempts: 1, defaultRetryAfter: "1 second" }).pipe(
        Layer.provide(Llm.scripted([{ text: "x" }]))
      )
      assert.isTrue(Exit.isSuccess(yield* built(llm)))
    })
  )
})
