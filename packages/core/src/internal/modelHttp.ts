/**
 * The HTTP side shared by the model providers: building a provider from its options once per
 * layer, sending a request with a deadline, turning a status into an `AiError` reason (429/529 →
 * `RateLimitError` with its `Retry-After`), reading JSON and SSE bodies with typed errors for
 * malformed or truncated ones; the parts both providers assemble alike (tool lists, tool results,
 * the finish part with its reported usage) and the constructors each provider exports.
 *
 * @internal
 */
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { identity } from "effect/Function"
import type * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as AiError from "effect/ai/AiError"
import * as LanguageModel from "effect/ai/LanguageModel"
import type * as Response from "effect/ai/Response"
import * as Tool from "effect/ai/Tool"
import * as Sse from "effect/encoding/Sse"
import * as HttpClient from "effect/http/HttpClient"
import type * as HttpClientError from "effect/http/HttpClientError"
import type * as HttpClientRequest from "effect/http/HttpClientRequest"
import type * as HttpClientResponse from "effect/http/HttpClientResponse"
import * as Pricing from "../Pricing.ts"
import * as Usage from "../Usage.ts"
import { millis } from "../DurationOption.ts"
import * as Deadlines from "./deadlines.ts"
import * as SelfReporting from "./selfReporting.ts"

export interface Target {
  readonly module: string
  readonly method: string
  readonly client: HttpClient.HttpClient
  /** The model name, said in the errors of a stalled stream. */
  readonly model: string
  /** Deadline for the whole response of a non-streaming call (headers and body), for a stream's headers. */
  readonly timeoutMs: number
  /** Longest wait for a stream's next body bytes (after its headers, between chunks). */
  readonly idleTimeoutMs: number
  /** Serves the idle deadline of every stream pull of the provider. */
  readonly idleDeadlines: Deadlines.Deadlines
  /** Serves that deadline for every call of the provider. */
  readonly deadlines: Deadlines.Deadlines
  /** Wait assumed after a 429/529 without a usable `Retry-After`. */
  readonly defaultRetryAfterMs: number
}

/** The options every provider has; each provider documents its own `baseUrl` and `apiKey`. */
export interface CommonOptions {
  /** The model name sent in each request, also the key into the price table. */
  readonly model: string
  readonly baseUrl?: string | undefined
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Prices merged over `Pricing.defaults` (yours win). */
  readonly prices?: Pricing.Table | undefined
  /** Deadline for the response (for streams: for the response headers). Default 60 seconds. */
  readonly timeout?: Duration.Input | undefined
  /**
   * For streams: the longest wait for the next SSE event, from the headers on and between events
   * (SSE comments such as `: ping` do not count; a provider's own ping events, e.g. Anthropic's
   * `event: ping`, do). Default: `timeout`.
   */
  readonly idleTimeout?: Duration.Input | undefined
  /** Wait assumed after a 429/529 without `Retry-After`. Default 1 second. */
  readonly defaultRetryAfter?: Duration.Input | undefined
}

/** A provider's options resolved once per layer (durations parsed, prices merged), not once per call. */
export interface Setup<O extends CommonOptions> {
  readonly options: O
  readonly prices: Pricing.Table
  readonly url: string
  readonly generateText: Target
  readonly streamText: Target
}

/** What a provider module names: itself, its default base URL, its path, its environment variables and how it answers. */
export interface Provider<O extends CommonOptions> {
  readonly module: string
  readonly defaultBaseUrl: string
  readonly path: string
  /** Read by `layerConfig` for `apiKey` and `baseUrl` when the options leave them out. */
  readonly apiKeyVariable: string
  readonly baseUrlVariable: string
  /** What `baseUrlVariable` stands for when unset, said when its value is refused. */
  readonly baseUrlVariableDefault: string
  /**
   * The `baseUrl` a value of `baseUrlVariable` stands for, when the variable means something else;
   * given the value without its query, which is kept after what it returns.
   */
  readonly baseUrlOfVariable?: ((value: string) => string) | undefined
  /** The provider's own option that it cannot use, if any (the common ones are checked for it). */
  readonly invalid?: ((options: O) => { readonly option: string; readonly reason: string } | undefined) | undefined
  readonly generateText: (
    setup: Setup<O>,
    options: LanguageModel.ProviderOptions
  ) => Effect.Effect<Array<Response.PartEncoded>, AiError.AiError>
  readonly streamText: (
    setup: Setup<O>,
    options: LanguageModel.ProviderOptions,
    counted: Counted
  ) => Stream.Stream<Response.StreamPartEncoded, AiError.AiError>
}

/**
 * What a response said of its usage, set by the provider as its events arrive: the exact counts the
 * server gave and the characters received. Its finish part, or the end of a stream cut short,
 * reports them, with an estimate for a count the server did not give.
 */
export interface Counted {
  /** Prompt tokens (cache reads and writes included and split out), once the server said them. */
  input: Omit<Pricing.Tokens, "outputTokens"> | undefined
  /** Output tokens so far, once the server said them. */
  outputTokens: number | undefined
  /** Characters of text and tool arguments received so far. */
  received: number
}

/** Nothing counted yet. */
export const counted = (): Counted => ({ input: undefined, outputTokens: undefined, received: 0 })

/** Characters per token of the estimate reported for a count the server did not give. */
const charactersPerToken = 4

/**
 * The tokens a response is reported at: the counts the server gave, else an estimate at 4
 * characters a token, the prompt's JSON as input, the text and tool arguments received
 * as output.
 */
const tokensOf = (request: LanguageModel.ProviderOptions, counted: Counted): Pricing.Tokens => ({
  ...(counted.input ?? { inputTokens: Math.ceil(JSON.stringify(request.prompt.content).length / charactersPerToken) }),
  outputTokens: counted.outputTokens ?? Math.ceil(counted.received / charactersPerToken)
})

/**
 * An option a provider cannot use (a duration effect would refuse or misread, a `maxTokens` that is
 * not a whole number of at least 1): building the provider (`make`, `layer`, `layerConfig`) dies with
 * it, naming the provider and the option, before any request is sent.
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  readonly module: string
  readonly option: string
  readonly reason: string
}> {
  override get message() {
    return `${this.module}.layer ${this.option}: ${this.reason}`
  }
}

/**
 * A base URL that is not an http(s) URL with a host, or has a fragment (`#…`, which no server sees:
 * the path appended to the URL would be lost with it): the `baseUrl` option (`option` set; `make`,
 * `layer` and `layerConfig` fail with it) or the provider's variable (`OPENAI_BASE_URL`,
 * `ANTHROPIC_BASE_URL`; `variable` set; `layerConfig` fails with it), when built, before any request
 * is sent.
 */
export class InvalidBaseUrl extends Data.TaggedError("InvalidBaseUrl")<{
  readonly module: string
  /** The variable the value came from, when it came from one. */
  readonly variable?: string | undefined
  /** The option the value came from, when it came from one. */
  readonly option?: "baseUrl" | undefined
  readonly value: string
  /** The URL that stands for the variable or option when it is left out (or, for a variable, empty). */
  readonly defaultUrl: string
}> {
  override get message() {
    const value = JSON.stringify(this.value)
    return this.variable === undefined
      ? `${this.module} option ${this.option} is ${value}: expected an http(s) URL without a fragment, such as ${this.defaultUrl} (left out for that default)`
      : `${this.variable} is ${value}: expected an http(s) URL without a fragment, such as ${this.defaultUrl} (unset or empty for that default)`
  }
}

/** Whether `value` can be a base URL: an http(s) URL with a host and no fragment. */
const isBaseUrl = (value: string): boolean => {
  if (!URL.canParse(value) || value.includes("#")) return false
  const url = new URL(value)
  return (url.protocol === "http:" || url.protocol === "https:") && url.host !== ""
}

/** `url` split before its query (`?…`): the part a path is appended to, and the query, kept as it is. */
const splitQuery = (url: string): readonly [string, string] => {
  const at = url.indexOf("?")
  return at === -1 ? [url, ""] : [url.slice(0, at), url.slice(at)]
}

/** `base` with `path` appended before its query. */
const withPath = (base: string, path: string): string => {
  const [before, query] = splitQuery(base)
  return `${before}${path}${query}`
}

/**
 * The base URL variable's value as the official OpenAI and Anthropic SDKs read theirs: trimmed,
 * empty taken as unset; anything else must be an http(s) URL.
 */
const baseUrlFromEnv = <O extends CommonOptions>(
  provider: Provider<O>
): Effect.Effect<string | undefined, Config.ConfigError | InvalidBaseUrl> =>
  Effect.flatMap(Config.option(Config.String(provider.baseUrlVariable)), (read) => {
    const value = Option.getOrUndefined(read)?.trim()
    if (value === undefined || value === "") return Effect.succeed(undefined)
    if (!isBaseUrl(value)) {
      return Effect.fail(
        new InvalidBaseUrl({
          module: provider.module,
          variable: provider.baseUrlVariable,
          value: Option.getOrThrow(read),
          defaultUrl: provider.baseUrlVariableDefault
        })
      )
    }
    const [before, query] = splitQuery(value)
    return Effect.succeed(`${(provider.baseUrlOfVariable ?? identity)(before)}${query}`)
  })

/**
 * The `baseUrl` option trimmed, without trailing slashes before its query (kept); the provider's
 * default when left out.
 */
const baseOf = <O extends CommonOptions>(provider: Provider<O>, options: O): Effect.Effect<string, InvalidBaseUrl> => {
  if (options.baseUrl === undefined) return Effect.succeed(provider.defaultBaseUrl)
  const value = options.baseUrl.trim()
  const [before, query] = splitQuery(value)
  return isBaseUrl(value)
    ? Effect.succeed(`${before.replace(/\/+$/, "")}${query}`)
    : Effect.fail(
        new InvalidBaseUrl({
          module: provider.module,
          option: "baseUrl",
          value: options.baseUrl,
          defaultUrl: provider.defaultBaseUrl
        })
      )
}

const durationMs = (
  module: string,
  option: string,
  input: Duration.Input | undefined,
  fallback: number
): Effect.Effect<number> => {
  const ms = millis(input)
  return Result.isFailure(ms)
    ? Effect.die(new InvalidOption({ module, option, reason: ms.failure }))
    : Effect.succeed(ms.success ?? fallback)
}

/**
 * The provider as a `LanguageModel` service over the `HttpClient` in context, marked as reporting
 * its streams' usage; the fibers serving its calls' deadlines and its streams' idle deadlines run in
 * the scope. A `baseUrl` that is not an http(s) URL fails with `InvalidBaseUrl`.
 */
export const makeModel = <O extends CommonOptions>(
  provider: Provider<O>,
  options: O
): Effect.Effect<LanguageModel.LanguageModel, InvalidBaseUrl, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function* () {
    const invalid = provider.invalid?.(options)
    if (invalid !== undefined) return yield* Effect.die(new InvalidOption({ module: provider.module, ...invalid }))
    const base = yield* baseOf(provider, options)
    const timeoutMs = yield* durationMs(provider.module, "timeout", options.timeout, 60_000)
    const idleTimeoutMs = yield* durationMs(provider.module, "idleTimeout", options.idleTimeout, timeoutMs)
    const defaultRetryAfterMs = yield* durationMs(
      provider.module,
      "defaultRetryAfter",
      options.defaultRetryAfter,
      1_000
    )
    const client = yield* HttpClient.HttpClient
    const deadlines = yield* Deadlines.make(timeoutMs)
    const idleDeadlines = yield* Deadlines.make(idleTimeoutMs)
    const target = (method: string): Target => ({
      module: provider.module,
      method,
      client,
      model: options.model,
      timeoutMs,
      idleTimeoutMs,
      idleDeadlines,
      deadlines,
      defaultRetryAfterMs
    })
    const setup: Setup<O> = {
      options,
      prices: { ...Pricing.defaults, ...options.prices },
      url: withPath(base, provider.path),
      generateText: target("generateText"),
      streamText: target("streamText")
    }
    const model = yield* LanguageModel.make({
      generateText: (request) => provider.generateText(setup, request),
      streamText: (request) => reportingCut(setup, request, (count) => provider.streamText(setup, request, count))
    })
    return SelfReporting.mark(model)
  })

/**
 * A stream that ends after its first part without its finish part (cut, failed, or stopped by its
 * consumer) reports its usage, priced as a finished call's: the exact counts its events gave before
 * the cut (`Counted`), else the estimate (`tokensOf`). The provider has counted them, and no part
 * carries its count.
 */
const reportingCut = <O extends CommonOptions, E, R>(
  setup: Setup<O>,
  request: LanguageModel.ProviderOptions,
  stream: (count: Counted) => Stream.Stream<Response.StreamPartEncoded, E, R>
): Stream.Stream<Response.StreamPartEncoded, E, R> =>
  Stream.suspend(() => {
    const count = counted()
    let started = false
    let finished = false
    return stream(count).pipe(
      Stream.tap((part) =>
        Effect.sync(() => {
          started = true
          if (part.type === "finish") finished = true
        })
      ),
      Stream.onExit(() =>
        started && !finished
          ? Usage.report(Pricing.usage(setup.prices, setup.options.model, tokensOf(request, count)))
          : Effect.void
      )
    )
  })

/** What a provider module exports: `make`, `layer`, and `layerConfig` reading its environment variables. */
export const constructors = <O extends CommonOptions>(provider: Provider<O>) => ({
  make: (options: O): Effect.Effect<LanguageModel.LanguageModel, InvalidBaseUrl, HttpClient.HttpClient | Scope.Scope> =>
    makeModel(provider, options),
  layer: (options: O): Layer.Layer<LanguageModel.LanguageModel, InvalidBaseUrl, HttpClient.HttpClient> =>
    Layer.effect(LanguageModel.LanguageModel, makeModel(provider, options)),
  layerConfig: (
    options: O
  ): Layer.Layer<LanguageModel.LanguageModel, Config.ConfigError | InvalidBaseUrl, HttpClient.HttpClient> =>
    Layer.effect(
      LanguageModel.LanguageModel,
      Effect.gen(function* () {
        const apiKey = yield* Config.option(Config.Redacted(provider.apiKeyVariable))
        const baseUrl = options.baseUrl ?? (yield* baseUrlFromEnv(provider))
        return yield* makeModel(provider, {
          ...options,
          apiKey: options.apiKey ?? Option.getOrUndefined(apiKey),
          baseUrl
        })
      })
    )
})

/** The tools a request may offer: user-defined ones, narrowed to `oneOf` when the tool choice names some. */
export const offeredTools = (options: LanguageModel.ProviderOptions): ReadonlyArray<Tool.Any> => {
  const choice = options.toolChoice
  const allowed = typeof choice === "object" && "oneOf" in choice ? new Set(choice.oneOf) : undefined
  return options.tools.filter(
    (tool) => !Tool.isProviderDefined(tool) && (allowed === undefined || allowed.has(tool.name))
  )
}

/** A tool result as the text both APIs take: a string as it is, anything else as JSON. */
export const resultText = (result: unknown): string =>
  typeof result === "string" ? result : JSON.stringify(result ?? null)

/** The counts the server gave, as a finish part's usage; a count it did not give is left out. */
const usageEncoded = (counted: Counted): Response.FinishPartEncoded["usage"] => {
  const input = counted.input
  const cacheRead = input?.cachedInputTokens ?? 0
  const cacheWrite = input?.cacheWriteTokens
  return {
    inputTokens:
      input === undefined
        ? {}
        : {
            total: input.inputTokens,
            uncached: input.inputTokens - cacheRead - (cacheWrite ?? 0),
            cacheRead,
            ...(cacheWrite !== undefined && { cacheWrite })
          },
    outputTokens: counted.outputTokens === undefined ? {} : { total: counted.outputTokens }
  }
}

/**
 * Reports the response's usage with `Usage.report`, priced for the setup's model: the counts the
 * server gave, else the estimate at 4 characters a token (`tokensOf`). Returns the finish part: its
 * `usage` carries the server's counts only, its `metadata.corral.costUsd` the reported cost.
 */
export const finish = (
  setup: Setup<CommonOptions>,
  request: LanguageModel.ProviderOptions,
  reason: Response.FinishReason,
  counted: Counted
): Effect.Effect<Response.FinishPartEncoded> => {
  const usage = Pricing.usage(setup.prices, setup.options.model, tokensOf(request, counted))
  return Effect.as(Usage.report(usage), {
    type: "finish",
    reason,
    usage: usageEncoded(counted),
    metadata: { corral: { costUsd: usage.costUsd, reported: true } }
  })
}

/** An `InvalidResponseError` of `target` saying what was wrong. */
export const invalidResponse = (target: Target, description: string): AiError.AiError =>
  fail(target, new AiError.InvalidResponseError({ description }))

const fail = (target: Target, reason: AiError.AiErrorReason): AiError.AiError =>
  AiError.make({ module: target.module, method: target.method, reason })

/** `Retry-After` (seconds or an HTTP date) or OpenAI's `retry-after-ms`, in milliseconds. */
export const retryAfterMs = (
  headers: Readonly<Record<string, string | undefined>>,
  now: number
): number | undefined => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms)
  const value = headers["retry-after"]
  if (value === undefined || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

const providerMessage = (body: string): string | undefined => {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown }
    if (typeof parsed.error === "string") return parsed.error
    if (typeof parsed.error?.message === "string") return parsed.error.message
    if (typeof parsed.message === "string") return parsed.message
  } catch {
    return undefined
  }
  return undefined
}

const clip = (text: string, max = 300): string => (text.length > max ? `${text.slice(0, max)}…` : text)

/** The `AiError` reason for a non-2xx response. */
export const reasonOfStatus = (
  status: number,
  headers: Readonly<Record<string, string | undefined>>,
  body: string,
  defaultRetryAfterMs: number,
  now: number
): AiError.AiErrorReason => {
  const message = providerMessage(body)
  const description = `HTTP ${status}: ${message ?? (clip(body) || "(empty body)")}`
  const http = { response: { status, headers: headers as Record<string, string> }, body: clip(body, 2000) }
  if (status === 429 || status === 529) {
    const after = retryAfterMs(headers, now) ?? defaultRetryAfterMs
    return new AiError.RateLimitError({ retryAfter: Duration.millis(after), http })
  }
  if (status === 401) return new AiError.AuthenticationError({ kind: "InvalidKey", description, http })
  if (status === 403) return new AiError.AuthenticationError({ kind: "InsufficientPermissions", description, http })
  if (status >= 500) return new AiError.InternalProviderError({ description, http })
  if (status >= 400) return new AiError.InvalidRequestError({ description, http })
  return new AiError.InvalidResponseError({ description: `unexpected ${description}`, http })
}

const transport = (target: Target, request: HttpClientRequest.HttpClientRequest, description: string) =>
  fail(
    target,
    new AiError.NetworkError({ reason: "TransportError", method: request.method, url: request.url, description })
  )

const fromHttpError = (
  target: Target,
  request: HttpClientRequest.HttpClientRequest,
  error: HttpClientError.HttpClientError
): AiError.AiError => {
  const reason = error.reason
  switch (reason._tag) {
    case "TransportError":
    case "EncodeError":
    case "InvalidUrlError":
      return fail(
        target,
        new AiError.NetworkError({
          reason: reason._tag,
          method: request.method,
          url: request.url,
          description: reason.description ?? String(reason.cause ?? error.message)
        })
      )
    default:
      return fail(target, new AiError.InvalidResponseError({ description: error.message }))
  }
}

/** Why an event stream stopped, with the status it was answered with; the request is named once, by the caller. */
const streamCut = (error: HttpClientError.HttpClientError): string => {
  const status = error.response === undefined ? "" : ` after HTTP ${error.response.status}`
  return `the event stream was cut${status}: ${String(error.reason.cause ?? error.reason.description ?? error.reason._tag)}`
}

/**
 * Reading a body as text fails only when its bytes stop coming (text decoding replaces bad bytes):
 * the connection dropped mid-body, a retryable `NetworkError` like a cut event stream.
 */
const bodyCut = (
  target: Target,
  request: HttpClientRequest.HttpClientRequest,
  error: HttpClientError.HttpClientError
): AiError.AiError =>
  error.reason._tag === "DecodeError"
    ? transport(
        target,
        request,
        `the response body was cut before its end: ${String(error.reason.cause ?? error.message)}`
      )
    : fromHttpError(target, request, error)

/** `request`'s response; a non-2xx status fails with the matching reason. */
const execute = (
  target: Target,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<HttpClientResponse.HttpClientResponse, AiError.AiError> =>
  target.client.execute(request).pipe(
    Effect.mapError((error) => fromHttpError(target, request, error)),
    Effect.flatMap((response) => {
      if (response.status >= 200 && response.status < 300) return Effect.succeed(response)
      return response.text.pipe(
        Effect.orElseSucceed(() => ""),
        Effect.flatMap((body) =>
          Effect.clockWith((clock) =>
            Effect.fail(
              fail(
                target,
                reasonOfStatus(
                  response.status,
                  response.headers,
                  body,
                  target.defaultRetryAfterMs,
                  clock.currentTimeMillisUnsafe()
                )
              )
            )
          )
        )
      )
    })
  )

/** No answer within the target's deadline: a retryable `NetworkError` saying what was late. */
const deadline =
  (target: Target, request: HttpClientRequest.HttpClientRequest, what: string) =>
  <A>(effect: Effect.Effect<A, AiError.AiError>): Effect.Effect<A, AiError.AiError> =>
    target.deadlines.within(effect, () => transport(target, request, `${what} within ${target.timeoutMs} ms`))

/**
 * Sends `request` (for a stream, whose body is read afterwards); a non-2xx status fails with the
 * matching reason, no response within the deadline with a retryable `NetworkError`.
 */
export const send = (
  target: Target,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<HttpClientResponse.HttpClientResponse, AiError.AiError> =>
  deadline(target, request, "no response")(execute(target, request))

/**
 * Sends `request` and decodes its whole JSON body of `schema`: headers and body within one deadline
 * (one deadline per call, not one per step).
 */
export const sendJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
  target: Target,
  request: HttpClientRequest.HttpClientRequest,
  schema: S
): Effect.Effect<S["Type"], AiError.AiError> =>
  execute(target, request).pipe(
    Effect.flatMap((response) => Effect.mapError(response.text, (error) => bodyCut(target, request, error))),
    deadline(target, request, "no response"),
    Effect.flatMap((text) => decodeJson(target, schema, "the response body", text))
  )

/** Decodes `text` as JSON of `schema`; the error names what was wrong and where. */
export const decodeJson = <S extends Schema.Top & { readonly DecodingServices: never }>(
  target: Target,
  schema: S,
  what: string,
  text: string
): Effect.Effect<S["Type"], AiError.AiError> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (cause) {
    return Effect.fail(
      fail(
        target,
        new AiError.InvalidResponseError({
          description: `${what} is not valid JSON (${(cause as Error).message}): ${clip(text, 200) || "(empty)"}`
        })
      )
    )
  }
  return Schema.decodeUnknownEffect(schema)(json).pipe(
    Effect.mapError((error) =>
      fail(
        target,
        new AiError.InvalidResponseError({ description: `${what} has an unexpected shape: ${error.message}` })
      )
    )
  )
}

/**
 * `events` with a deadline on each pull: a pull that gets no SSE event within the target's
 * `idleTimeoutMs` (the wait for the first event after the headers, then between events; not the
 * time the consumer takes between pulls) is interrupted and fails the stream with a retryable
 * `NetworkError` naming the model and endpoint; the response's body is then released, which aborts
 * the request. SSE comments (`: ping`) yield no event, so a server that sends only them does not
 * hold the stream open. Each pull runs in a fiber of its own under the provider's `idleDeadlines`
 * (one timer per provider); `Stream.timeoutOrElse` (a merge with a watcher fiber per stream) cost
 * about 1 ms more CPU per 100-chunk stream. An infinite `idleTimeoutMs` leaves the stream as it is.
 */
const withIdleDeadline = <A>(
  target: Target,
  request: HttpClientRequest.HttpClientRequest,
  events: Stream.Stream<A, AiError.AiError>
): Stream.Stream<A, AiError.AiError> =>
  target.idleTimeoutMs === Number.POSITIVE_INFINITY
    ? events
    : Stream.transformPull(events, (pull) =>
        Effect.succeed(
          target.idleDeadlines.within(pull, () =>
            transport(
              target,
              request,
              `${target.model} at ${request.url} sent no event for ${target.idleTimeoutMs} ms (idleTimeout; SSE comments do not count)`
            )
          )
        )
      )

/**
 * The SSE events of a streaming response. A body that ends before `isLast` saw its terminal event
 * fails with a retryable `NetworkError` saying the stream was cut; one that stalls, see `withIdleDeadline`.
 */
export const events = (
  target: Target,
  request: HttpClientRequest.HttpClientRequest,
  response: HttpClientResponse.HttpClientResponse,
  terminal: string
): Stream.Stream<Sse.Event, AiError.AiError> => {
  let ended = false
  const decoded: Stream.Stream<Sse.Event, AiError.AiError> = response.stream.pipe(
    Stream.mapError((error) => transport(target, request, streamCut(error))),
    Stream.decodeText(),
    Stream.pipeThroughChannel(Sse.decode()),
    Stream.mapError((error): AiError.AiError => {
      if (error instanceof Sse.Retry)
        return fail(target, new AiError.InvalidResponseError({ description: "unexpected SSE retry directive" }))
      if (error instanceof Sse.SseError)
        return fail(target, new AiError.InvalidResponseError({ description: `malformed SSE: ${error.message}` }))
      return error
    })
  )
  const body = withIdleDeadline(target, request, decoded).pipe(
    Stream.tap((event) =>
      Effect.sync(() => {
        if (event.data === terminal || event.event === terminal) ended = true
      })
    )
  )
  return Stream.concat(
    body,
    Stream.suspend(() =>
      ended
        ? Stream.empty
        : Stream.fail(transport(target, request, `the event stream ended before its ${JSON.stringify(terminal)} event`))
    )
  )
}
