import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as AiError from "effect/ai/AiError"
import type * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as Tool from "effect/ai/Tool"
import * as Base64 from "effect/encoding/Base64"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as ModelHttp from "./internal/modelHttp.ts"
import type * as Pricing from "./Pricing.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ModelHttp.CommonOptions {
  /**
   * Default `https://api.anthropic.com/v1`; requests go to `${baseUrl}/messages` (the value trimmed,
   * trailing slashes dropped, a path prefix kept, a query kept after the path: `…/v1?team=a` sends to
   * `…/v1/messages?team=a`). One that is not an http(s) URL with a host, or that has a fragment (`#…`),
   * fails building the provider with `InvalidBaseUrl`.
   */
  readonly baseUrl?: string | undefined
  /** Sent as `x-api-key`. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** `max_tokens` of each request (Anthropic requires one). Default 4096. */
  readonly maxTokens?: number | undefined
  /** The `anthropic-version` header. Default `2023-06-01`. */
  readonly version?: string | undefined
  /** Extra fields merged into every request body, e.g. `{ temperature: 0 }`. */
  readonly body?: Readonly<Record<string, unknown>> | undefined
  /** Extra request headers, e.g. `anthropic-beta`. */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const RawUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_read_input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  cache_creation_input_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})
type RawUsage = typeof RawUsage.Type

const Block = Schema.Struct({
  type: Schema.String,
  text: Schema.optional(Schema.String),
  id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  input: Schema.optional(Schema.Unknown)
})

const Message = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  content: Schema.Array(Block),
  stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
  usage: Schema.optional(RawUsage)
})

const Event = Schema.Struct({
  type: Schema.String,
  index: Schema.optional(Schema.Number),
  message: Schema.optional(
    Schema.Struct({
      id: Schema.optional(Schema.String),
      model: Schema.optional(Schema.String),
      usage: Schema.optional(RawUsage)
    })
  ),
  content_block: Schema.optional(Block),
  delta: Schema.optional(
    Schema.Struct({
      type: Schema.optional(Schema.String),
      text: Schema.optional(Schema.String),
      partial_json: Schema.optional(Schema.String),
      stop_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(Schema.Struct({ output_tokens: Schema.Number })),
  error: Schema.optional(Schema.Struct({ type: Schema.String, message: Schema.String }))
})

type Content = Array<Record<string, unknown>>

const imageBlock = (part: Prompt.FilePart): Record<string, unknown> | undefined => {
  if (!part.mediaType.startsWith("image/")) return undefined
  if (part.data instanceof URL) return { type: "image", source: { type: "url", url: part.data.href } }
  const data = typeof part.data === "string" ? part.data : Base64.encode(part.data)
  return { type: "image", source: { type: "base64", media_type: part.mediaType, data } }
}

const blocksOf = (message: Prompt.Message): Content => {
  const blocks: Content = []
  if (message.role === "system") return blocks
  for (const part of message.content) {
    switch (part.type) {
      case "text":
        if (part.text !== "") blocks.push({ type: "text", text: part.text })
        break
      case "file": {
        const image = imageBlock(part)
        if (image !== undefined) blocks.push(image)
        break
      }
      case "tool-call":
        if (!part.providerExecuted)
          blocks.push({ type: "tool_use", id: part.id, name: part.name, input: part.params ?? {} })
        break
      case "tool-result":
        if (message.role === "tool" || !part.providerExecuted)
          blocks.push({
            type: "tool_result",
            tool_use_id: part.id,
            content: ModelHttp.resultText(part.result),
            ...(part.isFailure && { is_error: true })
          })
        break
    }
  }
  return blocks
}

/** Anthropic's `system` and `messages` for a prompt; tool results go in user turns. @internal */
export const messagesOf = (
  prompt: Prompt.Prompt
): { system: string | undefined; messages: Array<Record<string, unknown>> } => {
  const system: Array<string> = []
  const messages: Array<{ role: string; content: Content }> = []
  for (const message of prompt.content) {
    if (message.role === "system") {
      system.push(message.content)
      continue
    }
    const role = message.role === "assistant" ? "assistant" : "user"
    const blocks = blocksOf(message)
    if (blocks.length === 0) continue
    const last = messages[messages.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: blocks })
  }
  return { system: system.length === 0 ? undefined : system.join("\n\n"), messages }
}

const toolsOf = (options: LanguageModel.ProviderOptions): Record<string, unknown> => {
  if (options.responseFormat.type === "json") {
    const name = options.responseFormat.objectName
    return {
      tools: [
        {
          name,
          description: `Respond with the ${name} object`,
          input_schema: Tool.getJsonSchemaFromSchema(options.responseFormat.schema)
        }
      ],
      tool_choice: { type: "tool", name }
    }
  }
  const choice = options.toolChoice
  const tools = ModelHttp.offeredTools(options).map((tool) => ({
    name: tool.name,
    description: Tool.getDescription(tool) ?? "",
    input_schema: Tool.getJsonSchema(tool)
  }))
  if (tools.length === 0) return {}
  const toolChoice =
    typeof choice === "string"
      ? { type: choice === "required" ? "any" : choice }
      : "tool" in choice
        ? { type: "tool", name: choice.tool }
        : { type: choice.mode === "required" ? "any" : "auto" }
  return { tools, tool_choice: toolChoice }
}

const finishReason = (reason: string | null | undefined): Response.FinishReason => {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
      return "stop"
    case "max_tokens":
      return "length"
    case "tool_use":
      return "tool-calls"
    case "refusal":
      return "content-filter"
    case "pause_turn":
      return "pause"
    case null:
    case undefined:
      return "unknown"
    default:
      return "other"
  }
}

/** The input tokens of Anthropic's usage: cache reads and writes are counted apart, and priced apart. */
const inputOf = (raw: RawUsage): Omit<Pricing.Tokens, "outputTokens"> => {
  const cachedInputTokens = raw.cache_read_input_tokens ?? 0
  const cacheWriteTokens = raw.cache_creation_input_tokens ?? 0
  return { inputTokens: raw.input_tokens + cachedInputTokens + cacheWriteTokens, cachedInputTokens, cacheWriteTokens }
}

type Setup = ModelHttp.Setup<Options>

const requestOf = (setup: Setup, options: LanguageModel.ProviderOptions, stream: boolean) => {
  const { system, messages } = messagesOf(options.prompt)
  const body = {
    model: setup.options.model,
    max_tokens: setup.options.maxTokens ?? 4096,
    ...(system !== undefined && { system }),
    messages,
    ...toolsOf(options),
    ...setup.options.body,
    ...(stream && { stream: true })
  }
  return HttpClientRequest.post(setup.url).pipe(
    HttpClientRequest.bodyJsonUnsafe(body),
    HttpClientRequest.setHeaders({
      accept: stream ? "text/event-stream" : "application/json",
      "anthropic-version": setup.options.version ?? "2023-06-01",
      ...setup.options.headers
    }),
    (request) =>
      setup.options.apiKey === undefined
        ? request
        : HttpClientRequest.setHeader(request, "x-api-key", Redacted.value(setup.options.apiKey))
  )
}

const objectText = (options: LanguageModel.ProviderOptions, name: string | undefined, input: unknown) =>
  options.responseFormat.type === "json" && name === options.responseFormat.objectName
    ? JSON.stringify(input)
    : undefined

const generateText = (setup: Setup, options: LanguageModel.ProviderOptions) => {
  const target = setup.generateText
  const request = requestOf(setup, options, false)
  return Effect.gen(function* () {
    const message = yield* ModelHttp.sendJson(target, request, Message)
    const counted = ModelHttp.counted()
    if (message.usage !== undefined) {
      counted.input = inputOf(message.usage)
      counted.outputTokens = message.usage.output_tokens
    }
    const parts: Array<Response.PartEncoded> = [{ type: "response-metadata", id: message.id, modelId: message.model }]
    for (const block of message.content) {
      if (block.type === "text" && block.text !== undefined) {
        counted.received += block.text.length
        parts.push({ type: "text", text: block.text })
      }
      if (block.type !== "tool_use") continue
      counted.received += JSON.stringify(block.input ?? {}).length
      const object = objectText(options, block.name, block.input)
      if (object !== undefined) parts.push({ type: "text", text: object })
      else if (block.id === undefined || block.name === undefined)
        return yield* ModelHttp.invalidResponse(target, "a tool_use block has no id or name")
      else parts.push({ type: "tool-call", id: block.id, name: block.name, params: block.input ?? {} })
    }
    parts.push(yield* ModelHttp.finish(setup, options, finishReason(message.stop_reason), counted))
    return parts
  })
}

interface OpenBlock {
  readonly kind: "text" | "tool" | "object" | "other"
  readonly id: string
  readonly name: string
  json: string
}

const streamText = (setup: Setup, options: LanguageModel.ProviderOptions, counted: ModelHttp.Counted) => {
  const target = setup.streamText
  const request = requestOf(setup, options, true)
  return Stream.unwrap(
    Effect.map(ModelHttp.send(target, request), (response) => {
      let reason: Response.FinishReason = "unknown"
      const blocks = new Map<number, OpenBlock>()
      const onEvent = (event: typeof Event.Type): Effect.Effect<Array<Response.StreamPartEncoded>, AiError.AiError> => {
        switch (event.type) {
          case "message_start": {
            if (event.message?.usage !== undefined) counted.input = inputOf(event.message.usage)
            return Effect.succeed([{ type: "response-metadata", id: event.message?.id, modelId: event.message?.model }])
          }
          case "content_block_start": {
            const index = event.index ?? 0
            const block = event.content_block
            if (block?.type === "text") {
              blocks.set(index, { kind: "text", id: `text-${index}`, name: "", json: "" })
              const first = block.text ?? ""
              counted.received += first.length
              return Effect.succeed([
                { type: "text-start", id: `text-${index}` },
                ...(first === "" ? [] : [{ type: "text-delta" as const, id: `text-${index}`, delta: first }])
              ])
            }
            if (block?.type === "tool_use") {
              const id = block.id ?? `tool-${index}`
              const name = block.name ?? ""
              const isObject = options.responseFormat.type === "json" && name === options.responseFormat.objectName
              blocks.set(index, { kind: isObject ? "object" : "tool", id, name, json: "" })
              return Effect.succeed(isObject ? [{ type: "text-start", id }] : [{ type: "tool-params-start", id, name }])
            }
            blocks.set(index, { kind: "other", id: `other-${index}`, name: "", json: "" })
            return Effect.succeed([])
          }
          case "content_block_delta": {
            const open = blocks.get(event.index ?? 0)
            if (open === undefined)
              return Effect.fail(
                ModelHttp.invalidResponse(target, `a delta for block ${event.index} that was never started`)
              )
            const delta = event.delta
            if (open.kind === "text" && delta?.text !== undefined) {
              counted.received += delta.text.length
              return Effect.succeed([{ type: "text-delta", id: open.id, delta: delta.text }])
            }
            if ((open.kind === "tool" || open.kind === "object") && delta?.partial_json !== undefined) {
              open.json += delta.partial_json
              counted.received += delta.partial_json.length
              return Effect.succeed([
                open.kind === "tool"
                  ? { type: "tool-params-delta", id: open.id, delta: delta.partial_json }
                  : { type: "text-delta", id: open.id, delta: delta.partial_json }
              ])
            }
            return Effect.succeed([])
          }
          case "content_block_stop": {
            const open = blocks.get(event.index ?? 0)
            if (open === undefined || open.kind === "other") return Effect.succeed([])
            if (open.kind === "text" || open.kind === "object")
              return Effect.succeed([{ type: "text-end", id: open.id }])
            return Effect.map(
              ModelHttp.decodeJson(
                target,
                Schema.Unknown,
                `the input of tool call ${JSON.stringify(open.name)} (${open.id})`,
                open.json || "{}"
              ),
              (params): Array<Response.StreamPartEncoded> => [
                { type: "tool-params-end", id: open.id },
                { type: "tool-call", id: open.id, name: open.name, params }
              ]
            )
          }
          case "message_delta": {
            if (event.delta?.stop_reason != null) reason = finishReason(event.delta.stop_reason)
            if (event.usage !== undefined) counted.outputTokens = event.usage.output_tokens
            return Effect.succeed([])
          }
          case "message_stop":
            return Effect.map(ModelHttp.finish(setup, options, reason, counted), (part) => [part])
          case "error": {
            const error = event.error
            const overloaded = error?.type === "overloaded_error" || error?.type === "rate_limit_error"
            return Effect.fail(
              AiError.make({
                module: "Anthropic",
                method: "streamText",
                reason: overloaded
                  ? new AiError.RateLimitError({ retryAfter: Duration.millis(target.defaultRetryAfterMs) })
                  : new AiError.InternalProviderError({
                      description: `stream error ${error?.type ?? "unknown"}: ${error?.message ?? ""}`
                    })
              })
            )
          }
          default:
            return Effect.succeed([])
        }
      }
      return ModelHttp.events(target, request, response, "message_stop").pipe(
        Stream.mapEffect((event) =>
          Effect.flatMap(ModelHttp.decodeJson(target, Event, `a ${event.event || "stream"} event`, event.data), onEvent)
        ),
        Stream.flattenIterable
      )
    })
  )
}

const constructors = ModelHttp.constructors<Options>({
  module: "Anthropic",
  defaultBaseUrl: "https://api.anthropic.com/v1",
  path: "/messages",
  apiKeyVariable: "ANTHROPIC_API_KEY",
  baseUrlVariableDefault: "https://api.anthropic.com",
  baseUrlVariable: "ANTHROPIC_BASE_URL",
  baseUrlOfVariable: (value) => {
    const base = value.replace(/\/+$/, "")
    return base.endsWith("/v1") ? base : `${base}/v1`
  },
  invalid: (options) =>
    options.maxTokens === undefined || (Number.isSafeInteger(options.maxTokens) && options.maxTokens >= 1)
      ? undefined
      : { option: "maxTokens", reason: `must be a whole number of at least 1, got ${options.maxTokens}` },
  generateText,
  streamText
})

/**
 * An option the provider cannot use (a `timeout`, `idleTimeout` or `defaultRetryAfter` effect would refuse or
 * misread, a `maxTokens` that is not a whole number of at least 1): building the provider dies with it, naming the provider and the option. One class for
 * both providers.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidOption = ModelHttp.InvalidOption

/**
 * @since 0.1.0
 * @category errors
 */
export type InvalidOption = ModelHttp.InvalidOption

/**
 * A base URL that is not an http(s) URL with a host (`localhost:8080`, `api.example.com`, a path) or
 * that has a fragment (`https://api.example.com/v1#x`: no server sees it, and the path would go after it):
 * the `baseUrl` option (`option: "baseUrl"`; `make`, `layer` and `layerConfig` fail with it) or
 * `ANTHROPIC_BASE_URL` (`variable`; `layerConfig` fails with it), naming it and its value, before any
 * request is sent. One class for both providers.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidBaseUrl = ModelHttp.InvalidBaseUrl

/**
 * @since 0.1.0
 * @category errors
 */
export type InvalidBaseUrl = ModelHttp.InvalidBaseUrl

/**
 * The provider as a `LanguageModel` service, using the `HttpClient` in context; the fibers serving
 * its calls' deadlines and its streams' idle deadlines run in the `Scope` and end with it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = constructors.make

/**
 * A `LanguageModel` layer for Anthropic's Messages API. A `baseUrl` that is not an http(s) URL, or
 * has a fragment, fails building it with {@link InvalidBaseUrl}. Every call reports its usage: the
 * server's counts (a body's `usage`; for a stream, the input tokens `message_start` gave and the
 * output tokens of a `message_delta`), else, per count, an estimate at 4 characters a token (the
 * prompt's JSON as input, the text and tool input received as output) — when the server did not send
 * it, and when a stream ends after its first part without its finish part (cut, failed, or stopped
 * by its consumer) before it came. A finish part's `usage` carries the server's counts only (a count
 * it did not send is left out); its `metadata.corral.costUsd`, the reported cost.
 *
 * @example
 * ```ts
 * import { Anthropic } from "@corral/core"
 * import { Config, Effect, Layer } from "effect"
 * import { LanguageModel } from "effect/ai"
 * import { FetchHttpClient } from "effect/http"
 *
 * const model = Anthropic.layerConfig({ model: "claude-sonnet-4-20250514" }).pipe(Layer.provide(FetchHttpClient.layer))
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(Effect.provide(model))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = constructors.layer

/**
 * Like `layer`, with `apiKey` from `ANTHROPIC_API_KEY` and `baseUrl` from `ANTHROPIC_BASE_URL` when
 * they are set (values given in `options` win). `ANTHROPIC_BASE_URL` is read as Anthropic's SDK and
 * Claude Code read it, the URL without the API version (`https://api.anthropic.com`, a gateway's
 * `https://gateway.example.com`): requests go to `${ANTHROPIC_BASE_URL}/v1/messages`. A value that
 * already ends in `/v1` is taken as it is. As in Anthropic's SDK, the value is trimmed and an empty
 * one means unset (`https://api.anthropic.com`). A query is kept after the path
 * (`https://gateway.example.com?team=a` sends to `…/v1/messages?team=a`); a value that is not an
 * http(s) URL, or has a fragment, fails building the layer with `InvalidBaseUrl`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = constructors.layerConfig
