import { Agent, Llm, RateLimiter, Usage } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { AiError, LanguageModel } from "effect/ai"

const price = { inputPer1k: 0.002, outputPer1k: 0.008 }

const cut = AiError.make({
  module: "Test",
  method: "streamText",
  reason: new AiError.NetworkError({
    reason: "TransportError",
    method: "POST",
    url: "http://127.0.0.1/x",
    description: "cut"
  })
})

/** Its first stream sends a part and is then cut; every later one fails before its first part. */
const cuttingModel = Layer.effect(
  LanguageModel.LanguageModel,
  Effect.suspend(() => {
    let calls = 0
    return LanguageModel.make({
      generateText: () => Effect.fail(cut),
      streamText: () =>
        ++calls === 1
          ? Stream.concat(Stream.make({ type: "text-start" as const, id: "0" }), Stream.fail(cut))
          : Stream.fail(cut)
    })
  })
)

/** A finish part with the given totals; a total left out is one the model did not send. */
const finishWith = (input: number | undefined, output: number | undefined) => ({
  type: "finish" as const,
  reason: "stop" as const,
  usage: {
    inputTokens: input === undefined ? {} : { total: input },
    outputTokens: output === undefined ? {} : { total: output }
  }
})

/** Its finish parts carry the given totals (or none), whole or streamed after some text. */
const totalsModel = (input: number | undefined, output: number | undefined) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.succeed([{ type: "text" as const, text: "ok" }, finishWith(input, output)]),
      streamText: () =>
        Stream.make(
          { type: "text-start" as const, id: "0" },
          { type: "text-delta" as const, id: "0", delta: "ok" },
          { type: "text-end" as const, id: "0" },
          finishWith(input, output)
        )
    })
  )

/** Its first stream finishes with 1000 input and 200 output tokens, its second is cut after its first part; a whole call reports 300 and 100. */
const finishingThenCutModel = Layer.effect(
  LanguageModel.LanguageModel,
  Effect.suspend(() => {
    let calls = 0
    return LanguageModel.make({
      generateText: () => Effect.succeed([{ type: "text" as const, text: "ok" }, finishWith(300, 100)]),
      streamText: () =>
        ++calls === 1
          ? Stream.make({ type: "text-start" as const, id: "0" }, finishWith(1000, 200))
          : Stream.concat(Stream.make({ type: "text-start" as const, id: "0" }), Stream.fail(cut))
    })
  })
)

describe("Llm", () => {
  it.effect("a scripted model replies with text and usage after its latency under TestClock", () =>
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(LanguageModel.generateText({ prompt: "hi" }), { startImmediately: true })
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 milli")
      const response = yield* Fiber.join(fiber)
      assert.strictEqual(response.text, "hello")
      assert.deepStrictEqual([response.usage.inputTokens.total, response.usage.outputTokens.total], [3, 1])
    }).pipe(Effect.provide(Llm.scripted([{ text: "hello", inputTokens: 3, outputTokens: 1, latency: "2 seconds" }])))
  )

  it.effect("a scripted model starts its script afresh for every build of the layer", () => {
    const model = Llm.scripted([{ text: "first" }, { text: "second" }])
    const ask = LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(model))
    return Effect.gen(function* () {
      assert.deepStrictEqual([(yield* ask).text, (yield* ask).text], ["first", "first"])
    })
  })

  it.effect("takes request and token budgets, settles them with the real count and reports usage", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.RateLimiter
      const response = yield* LanguageModel.generateText({ prompt: "summarize" })
      assert.strictEqual(response.text, "summary")
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 8800), { _tag: "Taken" })
      assert.deepStrictEqual(yield* limiter.tryTake("rpm", 1), { _tag: "Wait", ms: 1000 })
    }).pipe(
      Effect.provide(
        Llm.layer({ requests: "rpm", tokens: "tpm", estimateTokens: () => 5000, price }).pipe(
          Layer.provide(Llm.scripted([{ text: "summary", inputTokens: 1000, outputTokens: 200 }]))
        )
      ),
      Effect.provide(
        RateLimiter.layer({
          rpm: { limit: 1, interval: "1 second", burst: 1 },
          tpm: { limit: 10_000, interval: "1 minute" }
        })
      )
    )
  )

  it.effect(
    "a 429 pauses the buckets for every agent, is retried after Retry-After and usage is reported per agent",
    () =>
      Effect.gen(function* () {
        const ask = (id: string, options: Partial<Agent.Options<string, unknown, LanguageModel.LanguageModel>> = {}) =>
          Agent.make(id, {
            ...options,
            run: Effect.map(LanguageModel.generateText({ prompt: id }), (response) => response.text)
          })
        const agents = [
          ask("a"),
          Agent.make("starter", { run: Effect.sleep("1 second").pipe(Effect.as("go")) }),
          ask("b", { dependsOn: ["starter"] })
        ]
        const { result } = yield* Testing.runScripted(agents, {
          concurrency: 3,
          rateLimits: { rpm: { limit: 60, interval: "1 minute", burst: 10 } }
        })
        assert.isTrue(result.allSucceeded)
        const a = result.get("a")!
        const b = result.get("b")!
        assert.strictEqual(a.endedAt, 31_000 + 2000)
        assert.strictEqual(b.endedAt, 32_000 + 2000)
        assert.deepStrictEqual(b.usage, { inputTokens: 1000, outputTokens: 200, costUsd: 0.0036 })
        assert.deepStrictEqual(result.usage.inputTokens, 2000)
      }).pipe(
        Effect.provide(
          Llm.layer({ requests: "rpm", price }).pipe(
            Layer.provide(
              Llm.scripted((_, call) =>
                call === 1
                  ? { rateLimited: { retryAfter: "30 seconds" } }
                  : { text: "ok", inputTokens: 1000, outputTokens: 200, latency: "2 seconds" }
              )
            )
          )
        )
      )
  )

  it.effect("a streamed call: a 429 before its first part is retried after Retry-After and its usage is reported", () =>
    Effect.gen(function* () {
      const text = LanguageModel.streamText({ prompt: "a" }).pipe(
        Stream.runCollect,
        Effect.map((parts) => parts.flatMap((part) => (part.type === "text-delta" ? [part.delta] : [])).join(""))
      )
      const fiber = yield* Effect.forkChild(text, { startImmediately: true })
      yield* TestClock.adjust("31999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 milli")
      assert.strictEqual(yield* Fiber.join(fiber), "ok")
      const { result } = yield* Testing.runScripted([Agent.make("b", { run: Effect.asVoid(text) })])
      assert.deepStrictEqual(result.get("b")!.usage, { inputTokens: 1000, outputTokens: 200, costUsd: 0.0036 })
    }).pipe(
      Effect.provide(
        Llm.layer({ price }).pipe(
          Layer.provide(
            Llm.scripted((_, call) =>
              call === 1
                ? { rateLimited: { retryAfter: "30 seconds" } }
                : { text: "ok", inputTokens: 1000, outputTokens: 200, latency: "2 seconds" }
            )
          )
        )
      )
    )
  )

  it.effect("a streamed call settles its token estimate with the real count", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.RateLimiter
      yield* Stream.runDrain(LanguageModel.streamText({ prompt: "summarize" }))
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 8800), { _tag: "Taken" })
    }).pipe(
      Effect.provide(
        Llm.layer({ tokens: "tpm", estimateTokens: () => 5000 }).pipe(
          Layer.provide(Llm.scripted([{ text: "summary", inputTokens: 1000, outputTokens: 200 }]))
        )
      ),
      Effect.provide(RateLimiter.layer({ tpm: { limit: 10_000, interval: "1 minute" } }))
    )
  )

  it.effect(
    "a stream cut after its first part keeps its token estimate in the bucket and reports it as input; one failing before it gives the estimate back",
    () =>
      Effect.gen(function* () {
        const limiter = yield* RateLimiter.RateLimiter
        const read = LanguageModel.streamText({ prompt: "cut" }).pipe(Stream.runDrain, Effect.flip)
        const { result } = yield* Testing.runScripted([Agent.make("reader", { run: read })])
        const outcome = result.get("reader")!
        assert.strictEqual(outcome._tag, "Succeeded")
        assert.strictEqual(outcome._tag === "Succeeded" && outcome.value.reason._tag, "NetworkError")
        assert.deepStrictEqual(outcome.usage, { inputTokens: 5000, outputTokens: 0, costUsd: 0.01 })
        assert.deepStrictEqual(yield* limiter.tryTake("tpm", 5000), { _tag: "Taken" })
        assert.strictEqual((yield* limiter.tryTake("tpm", 1))._tag, "Wait")
        yield* TestClock.adjust("1 minute")
        yield* Effect.flip(Stream.runDrain(LanguageModel.streamText({ prompt: "refused" })))
        assert.deepStrictEqual(yield* limiter.tryTake("tpm", 10_000), { _tag: "Taken" })
      }).pipe(
        Effect.provide(
          Llm.layer({ tokens: "tpm", estimateTokens: () => 5000, price }).pipe(Layer.provide(cuttingModel))
        ),
        Effect.provide(RateLimiter.layer({ tpm: { limit: 10_000, interval: "1 minute" } }))
      )
  )

  it.effect("a stream its consumer stops before the finish part keeps its token estimate and reports it once", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter.RateLimiter
      const reported: Array<Partial<Usage.Usage>> = []
      yield* Stream.runDrain(LanguageModel.streamText({ prompt: "summarize" }).pipe(Stream.take(2))).pipe(
        Effect.provideService(Usage.Reporter, (usage) => reported.push(usage))
      )
      assert.deepStrictEqual(reported, [{ inputTokens: 5000, outputTokens: 0, costUsd: 0 }])
      assert.deepStrictEqual(yield* limiter.tryTake("tpm", 5000), { _tag: "Taken" })
      assert.strictEqual((yield* limiter.tryTake("tpm", 1))._tag, "Wait")
    }).pipe(
      Effect.provide(
        Llm.layer({ tokens: "tpm", estimateTokens: () => 5000 }).pipe(
          Layer.provide(Llm.scripted([{ text: "summary", inputTokens: 1000, outputTokens: 200 }]))
        )
      ),
      Effect.provide(RateLimiter.layer({ tpm: { limit: 10_000, interval: "1 minute" } }))
    )
  )

  it.effect(
    "a stream cut after its first part, from a model that reports nothing itself, counts against the budget",
    () =>
      Effect.gen(function* () {
        const read = LanguageModel.streamText({ prompt: "cut" }).pipe(
          Stream.runDrain,
          Effect.ignore,
          Effect.andThen(Effect.sleep("1 second"))
        )
        const { result } = yield* Testing.runScripted([Agent.make("reader", { run: read })], {
          budget: { tokens: 1000 }
        })
        const outcome = result.get("reader")!
        assert.deepStrictEqual(outcome.usage, { inputTokens: 5000, outputTokens: 0, costUsd: 0.01 })
        assert.strictEqual(result.stopped?._tag, "BudgetExceeded")
        assert.strictEqual(outcome._tag, "Interrupted")
        assert.isTrue(outcome._tag === "Interrupted" && outcome.crossedBudget)
      }).pipe(Effect.provide(Llm.layer({ estimateTokens: () => 5000, price }).pipe(Layer.provide(cuttingModel))))
  )

  it.effect("a finish part without totals reports and settles the token estimate for each count it leaves out", () =>
    Effect.gen(function* () {
      const reports = (input: number | undefined, output: number | undefined) =>
        Effect.gen(function* () {
          const reported: Array<Partial<Usage.Usage>> = []
          const limiter = yield* RateLimiter.RateLimiter
          yield* Effect.gen(function* () {
            yield* LanguageModel.generateText({ prompt: "x" })
            yield* Stream.runDrain(LanguageModel.streamText({ prompt: "x" }))
          }).pipe(
            Effect.provide(
              Llm.layer({ tokens: "tpm", estimateTokens: () => 5000, price }).pipe(
                Layer.provide(totalsModel(input, output))
              )
            ),
            Effect.provideService(Usage.Reporter, (usage) => reported.push(usage))
          )
          const kept = 2 * ((input ?? 5000) + (output ?? 0))
          assert.deepStrictEqual(yield* limiter.tryTake("tpm", 100_000 - kept), { _tag: "Taken" })
          assert.strictEqual((yield* limiter.tryTake("tpm", 1))._tag, "Wait")
          yield* TestClock.adjust("1 minute")
          return reported
        })
      assert.deepStrictEqual(yield* reports(undefined, undefined), [
        { inputTokens: 5000, outputTokens: 0, costUsd: 0.01 },
        { inputTokens: 5000, outputTokens: 0, costUsd: 0.01 }
      ])
      assert.deepStrictEqual(yield* reports(undefined, 200), [
        { inputTokens: 5000, outputTokens: 200, costUsd: 0.0116 },
        { inputTokens: 5000, outputTokens: 200, costUsd: 0.0116 }
      ])
      assert.deepStrictEqual(yield* reports(1000, undefined), [
        { inputTokens: 1000, outputTokens: 0, costUsd: 0.002 },
        { inputTokens: 1000, outputTokens: 0, costUsd: 0.002 }
      ])
      assert.deepStrictEqual(yield* reports(0, 0), [
        { inputTokens: 0, outputTokens: 0, costUsd: 0 },
        { inputTokens: 0, outputTokens: 0, costUsd: 0 }
      ])
    }).pipe(Effect.provide(RateLimiter.layer({ tpm: { limit: 100_000, interval: "1 minute" } })))
  )

  it.effect("Llm.layer over Llm.layer counts a finished stream, a cut one and a whole call once under the budget", () =>
    Effect.gen(function* () {
      const run = Effect.gen(function* () {
        yield* Stream.runDrain(LanguageModel.streamText({ prompt: "finished" }))
        yield* Effect.ignore(Stream.runDrain(LanguageModel.streamText({ prompt: "cut" })))
        yield* LanguageModel.generateText({ prompt: "whole" })
        return "done"
      })
      const { result } = yield* Testing.runScripted([Agent.make("reader", { run })], { budget: { tokens: 7000 } })
      const outcome = result.get("reader")!
      assert.strictEqual(outcome._tag, "Succeeded")
      assert.isUndefined(result.stopped)
      assert.strictEqual(outcome.usage.inputTokens, 1000 + 5000 + 300)
      assert.strictEqual(outcome.usage.outputTokens, 200 + 100)
      assert.closeTo(outcome.usage.costUsd, (6300 * 0.002 + 300 * 0.008) / 1000, 1e-12)
    }).pipe(
      Effect.provide(
        Llm.layer({ estimateTokens: () => 5000, price }).pipe(
          Layer.provide(Llm.layer({ estimateTokens: () => 5000, price }).pipe(Layer.provide(finishingThenCutModel)))
        )
      )
    )
  )

  it("maps a provider 429 to RateLimited", () => {
    const error = AiError.make({
      module: "OpenAI",
      method: "generateText",
      reason: new AiError.RateLimitError({ retryAfter: Duration.seconds(30) })
    })
    assert.deepStrictEqual(
      Llm.toRateLimited(error, "openai"),
      new RateLimiter.RateLimited({ key: "openai", retryAfter: 30_000 })
    )
    assert.isUndefined(Llm.toRateLimited(new Error("x"), "k"))
  })
})
