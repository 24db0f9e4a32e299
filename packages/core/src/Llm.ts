/**
 * Language models under a run's limits. `Llm.layer` wraps effect/ai's `LanguageModel` so every call
 * takes a request token and its estimated tokens from the `RateLimiter` in context (the run's own
 * when it has `rateLimits`), settles the estimate with the real count, reports usage and cost with
 * `Usage.report`, and after a 429 pauses the buckets for every caller and retries honouring
 * `Retry-After`. Models that report usage themselves (`OpenAiCompat`, `Anthropic`, which mark
 * their finish part with `metadata.corral.reported` and report a stream cut short too, and a model
 * `Llm.layer` or `Llm.wrap` already wrapped) are not reported twice; the innermost reporter's price
 * gives the cost. Over a model that reports nothing itself, a stream cut short is reported at its
 * token estimate, and so is a total its finish part leaves out. `Llm.scripted` is a deterministic
 * `LanguageModel` for tests under `TestClock`.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import { millis } from "./DurationOption.ts"
import * as SelfReporting from "./internal/selfReporting.ts"
import * as RateLimiter from "./RateLimiter.ts"
import * as Usage from "./Usage.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Bucket taking one token per call, e.g. requests per minute. */
  readonly requests?: string | undefined
  /** Bucket taking the call's estimated tokens up front, settled with the real count after. */
  readonly tokens?: string | undefined
  /**
   * Estimated tokens of a call, also the input tokens reported, over a model that reports nothing
   * itself, for a stream cut short and for a finish part without an input total. Default: a quarter
   * of the prompt's JSON length plus 256.
   */
  readonly estimateTokens?: ((prompt: Prompt.RawInput) => number) | undefined
  /** Prices in USD per 1,000 tokens, for the reported `costUsd`. */
  readonly price?: { readonly inputPer1k: number; readonly outputPer1k: number } | undefined
  /** Attempts per call when the provider answers 429. Default 5. */
  readonly maxAttempts?: number | undefined
  /** Wait after a 429 without `Retry-After`. Default 1 second. */
  readonly defaultRetryAfter?: Duration.Input | undefined
}

/**
 * An option `Llm.layer` cannot use: a `maxAttempts` that is not a whole number of at least 1, a
 * `defaultRetryAfter` effect would refuse or misread. Building the layer dies with it, naming the
 * option, before any call; `Llm.wrap` throws it; a {@link Reply} of `Llm.scripted` with such a
 * `latency` or `retryAfter` dies with it when the call that plays it runs.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  /** The function given the options (`scripted`: a reply's, when the call that plays it runs). */
  readonly via: "layer" | "wrap" | "scripted"
  readonly option: "maxAttempts" | "defaultRetryAfter" | "latency" | "rateLimited.retryAfter"
  readonly reason: string
}> {
  override get message() {
    return `Llm.${this.via} ${this.option}: ${this.reason}`
  }
}

const invalidOption = (options: Options, via: "layer" | "wrap"): InvalidOption | undefined => {
  const attempts = options.maxAttempts
  if (attempts !== undefined && !(Number.isSafeInteger(attempts) && attempts >= 1)) {
    const reason = `must be a whole number of at least 1, got ${attempts}`
    return new InvalidOption({ via, option: "maxAttempts", reason })
  }
  const retryAfter = millis(options.defaultRetryAfter)
  return Result.isFailure(retryAfter)
    ? new InvalidOption({ via, option: "defaultRetryAfter", reason: retryAfter.failure })
    : undefined
}

const defaultEstimate = (prompt: Prompt.RawInput): number => {
  const text = typeof prompt === "string" ? prompt : JSON.stringify(prompt)
  return Math.ceil((text?.length ?? 0) / 4) + 256
}

/**
 * The `RateLimited` error for a provider's 429 (`AiError` with a `RateLimitError` reason), else
 * `undefined`.
 *
 * @example
 * ```ts
 * import { Llm } from "@corral/core"
 * import { Effect } from "effect"
 *
 * declare const callProvider: Effect.Effect<string, Error>
 * const call = callProvider.pipe(
 *   Effect.catch((error) => {
 *     const limited = Llm.toRateLimited(error, "openai")
 *     return limited === undefined ? Effect.fail(error) : Effect.sleep(limited.retryAfter).pipe(Effect.andThen(callProvider))
 *   })
 * )
 * ```
 * @since 0.1.0
 * @category errors
 */
export const toRateLimited = (
  error: unknown,
  key: string,
  defaultRetryAfter: Duration.Input = "1 second"
): RateLimiter.RateLimited | undefined => {
  if (!AiError.isAiError(error) || error.reason._tag !== "RateLimitError") return undefined
  const retryAfter =
    error.retryAfter === undefined ? Duration.toMillis(defaultRetryAfter) : Duration.toMillis(error.retryAfter)
  return new RateLimiter.RateLimited({ key, retryAfter })
}

const priced = (inputTokens: number, outputTokens: number, options: Options): Usage.Usage => {
  const price = options.price
  const costUsd = price === undefined ? 0 : (inputTokens * price.inputPer1k + outputTokens * price.outputPer1k) / 1000
  return { inputTokens, outputTokens, costUsd }
}

/**
 * A response's usage: its totals, and for a total it leaves out what a stream cut short reports,
 * the call's token estimate as input and 0 as output.
 */
const usageOf = (usage: Response.Usage, options: Options, estimate: number): Usage.Usage =>
  priced(usage.inputTokens.total ?? estimate, usage.outputTokens.total ?? 0, options)

const reportedByProvider = (response: unknown): boolean => {
  const content = (response as { readonly content?: ReadonlyArray<Response.AnyPart> }).content
  const finish = content?.find((part) => part.type === "finish")
  const corral = finish?.metadata?.corral as { readonly reported?: unknown } | null | undefined
  return corral?.reported === true
}

interface Budget {
  readonly limiter: RateLimiter.Service | undefined
  readonly estimate: number
}

const takeBudget = (prompt: Prompt.RawInput, options: Options): Effect.Effect<Budget> =>
  Effect.gen(function* () {
    const limiter = Option.getOrUndefined(yield* Effect.serviceOption(RateLimiter.RateLimiter))
    const estimate = (options.estimateTokens ?? defaultEstimate)(prompt)
    if (limiter !== undefined && options.requests !== undefined) yield* limiter.take(options.requests, 1)
    if (limiter !== undefined && options.tokens !== undefined) yield* limiter.take(options.tokens, estimate)
    return { limiter, estimate }
  })

const settle = (budget: Budget, options: Options, actual: number): Effect.Effect<void> =>
  budget.limiter === undefined || options.tokens === undefined
    ? Effect.void
    : budget.limiter.settle(options.tokens, budget.estimate, actual)

const pauseAll = (budget: Budget, options: Options, limited: RateLimiter.RateLimited): Effect.Effect<void> => {
  const limiter = budget.limiter
  if (limiter === undefined) return Effect.sleep(limited.retryAfter)
  const keys = [options.requests, options.tokens].filter((key): key is string => key !== undefined)
  if (keys.length === 0) return Effect.sleep(limited.retryAfter)
  return Effect.andThen(
    settle(budget, options, 0),
    Effect.forEach(keys, (key) => limiter.pause(key, limited.retryAfter), { discard: true })
  )
}

const guarded = <A extends { readonly usage: Response.Usage }, E, R>(
  prompt: Prompt.RawInput,
  call: Effect.Effect<A, E, R>,
  options: Options,
  selfReporting: boolean
): Effect.Effect<A, E, R> => {
  const maxAttempts = options.maxAttempts ?? 5
  const attempt = (n: number): Effect.Effect<A, E, R> =>
    Effect.flatMap(takeBudget(prompt, options), (budget) =>
      call.pipe(
        Effect.tap((response) => {
          const usage = usageOf(response.usage, options, budget.estimate)
          const settled = settle(budget, options, Usage.tokens(usage))
          return selfReporting || reportedByProvider(response) ? settled : Effect.andThen(settled, Usage.report(usage))
        }),
        Effect.catch((error) => {
          const limited = toRateLimited(error, options.requests ?? options.tokens ?? "llm", options.defaultRetryAfter)
          if (limited === undefined || n >= maxAttempts)
            return Effect.andThen(settle(budget, options, 0), Effect.fail(error))
          return Effect.andThen(pauseAll(budget, options, limited), attempt(n + 1))
        })
      )
    )
  return attempt(1)
}

/** The part a stream ends with, carrying its usage, settled (and reported) as a whole response's. */
const onStreamPart = (
  budget: Budget,
  options: Options,
  selfReporting: boolean,
  part: Response.StreamPart<any>
): Effect.Effect<void> => {
  if (part.type !== "finish") return Effect.void
  const usage = usageOf(part.usage, options, budget.estimate)
  const settled = settle(budget, options, Usage.tokens(usage))
  return selfReporting || reportedByProvider({ content: [part] })
    ? settled
    : Effect.andThen(settled, Usage.report(usage))
}

/**
 * A stream under the budgets: a 429 before its first part is retried as a whole call's is, and any
 * other failure before it gives the estimate back. A stream that ends without its finish part after
 * its first (cut, failed, or stopped by its consumer) keeps the estimate in the bucket: the provider
 * counted the prompt and what it sent, and no part carries a count. Unless the model reports its
 * usage itself (`selfReporting`), the estimate is reported as its input tokens, priced.
 */
const guardedStream = <E, R>(
  prompt: Prompt.RawInput,
  stream: Stream.Stream<Response.StreamPart<any>, E, R>,
  options: Options,
  selfReporting: boolean
): Stream.Stream<Response.StreamPart<any>, E, R> => {
  const maxAttempts = options.maxAttempts ?? 5
  const attempt = (n: number): Stream.Stream<Response.StreamPart<any>, E, R> =>
    Stream.unwrap(
      Effect.map(takeBudget(prompt, options), (budget) => {
        let started = false
        let finished = false
        const guarded = stream.pipe(
          Stream.tap((part) => {
            started = true
            if (part.type === "finish") finished = true
            return onStreamPart(budget, options, selfReporting, part)
          }),
          Stream.catch((error) => {
            if (started) return Stream.fail(error)
            const limited = toRateLimited(error, options.requests ?? options.tokens ?? "llm", options.defaultRetryAfter)
            if (limited === undefined || n >= maxAttempts)
              return Stream.fromEffect(Effect.andThen(settle(budget, options, 0), Effect.fail(error)))
            return Stream.unwrap(Effect.as(pauseAll(budget, options, limited), attempt(n + 1)))
          })
        )
        return selfReporting
          ? guarded
          : Stream.onExit(guarded, () =>
              started && !finished ? Usage.report(priced(budget.estimate, 0, options)) : Effect.void
            )
      })
    )
  return attempt(1)
}

/**
 * Wraps a `LanguageModel` service with rate limits, usage reporting and 429 retries. A streamed
 * call is settled and reported from its finish part, and retried after a 429 that comes before its
 * first part (a failure after it ends the stream). A stream that ends without its finish part after
 * its first (cut, failed, or stopped by its consumer) keeps its token estimate in the `tokens`
 * bucket, and that estimate is reported as its usage: as input tokens, priced with `price`, so a
 * `budget` sees it. A response or finish part that leaves a total out is settled and reported the
 * same way for that total: its input as the token estimate, its output as 0. Over `OpenAiCompat`
 * and `Anthropic`, which report every call themselves (the counts the server gave, else an estimate
 * from the characters sent and received), and over a model `wrap` or {@link layer} returned, it
 * reports nothing more, only settles: the model it returns is marked as reporting its own usage, so
 * a nested `Llm.layer` counts each call once. Options it cannot use throw {@link InvalidOption} (it
 * is a constructor).
 *
 * @since 0.1.0
 * @category constructors
 */
export const wrap = (model: LanguageModel.LanguageModel, options: Options): LanguageModel.LanguageModel => {
  const invalid = invalidOption(options, "wrap")
  if (invalid !== undefined) throw invalid
  return wrapChecked(model, options)
}

const wrapChecked = (model: LanguageModel.LanguageModel, options: Options): LanguageModel.LanguageModel => {
  const selfReporting = SelfReporting.isMarked(model)
  return SelfReporting.mark({
    ...model,
    generateText: ((request: LanguageModel.GenerateTextOptions<any>) =>
      guarded(
        request.prompt,
        model.generateText(request as never),
        options,
        selfReporting
      )) as unknown as LanguageModel.LanguageModel["generateText"],
    generateObject: ((request: LanguageModel.GenerateObjectOptions<any, any>) =>
      guarded(
        request.prompt,
        model.generateObject(request as never),
        options,
        selfReporting
      )) as unknown as LanguageModel.LanguageModel["generateObject"],
    streamText: ((request: LanguageModel.GenerateTextOptions<any>) =>
      guardedStream(
        request.prompt,
        model.streamText(request as never),
        options,
        selfReporting
      )) as unknown as LanguageModel.LanguageModel["streamText"]
  })
}

/**
 * A layer replacing the `LanguageModel` in context with one under the run's limits. Options it
 * cannot use make the layer die with {@link InvalidOption} when it is built.
 *
 * @example
 * ```ts
 * import { Agent, Corral, Llm } from "@corral/core"
 * import { Effect, Layer } from "effect"
 * import { LanguageModel } from "effect/ai"
 *
 * declare const providerLayer: Layer.Layer<LanguageModel.LanguageModel>
 * const llm = Llm.layer({ requests: "openai-rpm", tokens: "openai-tpm", price: { inputPer1k: 0.002, outputPer1k: 0.008 } })
 * const agent = Agent.make("summarize", {
 *   rateLimit: "openai-rpm",
 *   run: LanguageModel.generateText({ prompt: "Summarize ..." }).pipe(Effect.map((r) => r.text))
 * })
 * Corral.run([agent], { rateLimits: { "openai-rpm": { limit: 60, interval: "1 minute" },
 *   "openai-tpm": { limit: 90_000, interval: "1 minute" } } }).pipe(Effect.provide(llm.pipe(Layer.provide(providerLayer))))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, LanguageModel.LanguageModel> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.suspend(() => {
      const invalid = invalidOption(options, "layer")
      return invalid === undefined
        ? LanguageModel.LanguageModel.useSync((model) => wrapChecked(model, options))
        : Effect.die(invalid)
    })
  )

/**
 * One scripted reply: after `latency` of (virtual) time, `text` with the given token counts, or a
 * 429 (`rateLimited`) with an optional `retryAfter`. A `latency` or `retryAfter` that
 * `DurationOption.millis` refuses dies with `InvalidOption` (`via: "scripted"`) when the call runs.
 *
 * @since 0.1.0
 * @category testing
 */
export interface Reply {
  readonly text?: string | undefined
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly latency?: Duration.Input | undefined
  readonly rateLimited?: { readonly retryAfter?: Duration.Input | undefined } | undefined
}

/**
 * Replies in order (the last one repeats), or a function of the prompt and the call number (from 1).
 *
 * @since 0.1.0
 * @category testing
 */
export type Script = ReadonlyArray<Reply> | ((prompt: Prompt.Prompt, call: number) => Reply)

const replyOf = (script: Script, prompt: Prompt.Prompt, call: number): Reply =>
  typeof script === "function" ? script(prompt, call) : (script[Math.min(call, script.length) - 1] ?? {})

const partsOf = (reply: Reply): Array<Response.PartEncoded> => [
  { type: "text", text: reply.text ?? "" },
  {
    type: "finish",
    reason: "stop",
    usage: { inputTokens: { total: reply.inputTokens ?? 0 }, outputTokens: { total: reply.outputTokens ?? 0 } }
  }
]

/** A reply's duration in milliseconds, or a defect naming it. */
const replyMillis = (
  option: "latency" | "rateLimited.retryAfter",
  input: Duration.Input | undefined
): Effect.Effect<number | undefined> => {
  const ms = millis(input)
  return Result.isFailure(ms)
    ? Effect.die(new InvalidOption({ via: "scripted", option, reason: ms.failure }))
    : Effect.succeed(ms.success)
}

const play = (script: Script, counter: { calls: number }, prompt: Prompt.Prompt) =>
  Effect.gen(function* () {
    const reply = replyOf(script, prompt, ++counter.calls)
    const latency = yield* replyMillis("latency", reply.latency)
    if (latency !== undefined) yield* Effect.sleep(latency)
    if (reply.rateLimited !== undefined) {
      const retryAfter = yield* replyMillis("rateLimited.retryAfter", reply.rateLimited.retryAfter)
      return yield* AiError.make({
        module: "Llm",
        method: "scripted",
        reason: new AiError.RateLimitError(retryAfter === undefined ? {} : { retryAfter: Duration.millis(retryAfter) })
      })
    }
    return reply
  })

/**
 * A real `LanguageModel` that plays a script: replies, token counts, latencies and 429s given by
 * the test. Time passes through `Effect.sleep`, so runs are deterministic under `TestClock`. Each
 * build of the layer plays the script from its first reply, so tests may share one layer value.
 * Its token counts are in each response's `usage`, but it reports no usage itself (the providers
 * do): put {@link layer} over it to report them, so budgets and `outcome.usage` see them.
 *
 * @example
 * ```ts
 * import { Llm } from "@corral/core"
 * import { Effect } from "effect"
 * import { LanguageModel } from "effect/ai"
 *
 * const model = Llm.scripted([
 *   { rateLimited: { retryAfter: "30 seconds" } },
 *   { text: "summary", inputTokens: 1200, outputTokens: 300, latency: "2 seconds" }
 * ])
 * const program = LanguageModel.generateText({ prompt: "..." }).pipe(Effect.provide(model))
 * ```
 * @since 0.1.0
 * @category testing
 */
export const scripted = (script: Script): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.suspend(() => scriptedModel(script, { calls: 0 }))
  )

const scriptedModel = (script: Script, counter: { calls: number }) =>
  LanguageModel.make({
    generateText: (options) => Effect.map(play(script, counter, options.prompt), partsOf),
    streamText: (options) =>
      Stream.unwrap(
        Effect.map(
          play(script, counter, options.prompt),
          (reply): Stream.Stream<Response.StreamPartEncoded> =>
            Stream.fromIterable([
              { type: "text-start", id: "0" },
              { type: "text-delta", id: "0", delta: reply.text ?? "" },
              { type: "text-end", id: "0" },
              partsOf(reply)[1] as Response.StreamPartEncoded
            ])
        )
      )
  })
