import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as LanguageModel from "effect/ai/LanguageModel"
import type * as Prompt from "effect/ai/Prompt"
import type * as Response from "effect/ai/Response"
import * as Tool from "effect/ai/Tool"
import * as Base64 from "effect/encoding/Base64"
import * as HttpClientRequest from "effect/http/HttpClientRequest"
import * as ModelHttp from "./internal/modelHttp.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ModelHttp.CommonOptions {
  /**
   * Default `https://api.openai.com/v1`; requests go to `${baseUrl}/chat/completions` (the value
   * trimmed, trailing slashes dropped, a path prefix kept). A query is kept after the path, as Azure
   * OpenAI's deployments need: `https://x.openai.azure.com/openai/deployments/gpt?api-version=2024-06-01`
   * sends to `…/deployments/gpt/chat/completions?api-version=2024-06-01`. One that is not an http(s)
   * URL with a host, or that has a fragment (`#…`), fails building the provider with `InvalidBaseUrl`.
   */
  readonly baseUrl?: string | undefined
  /** Sent as `Authorization: Bearer …`; omit for local servers that need no key. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Extra fields merged into every request body, e.g. `{ temperature: 0, max_tokens: 512 }`. */
  readonly body?: Readonly<Record<string, unknown>> | undefined
  /** Extra request headers. */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const Usage_ = Schema.NullOr(
  Schema.Struct({
    prompt_tokens: Schema.Number,
    completion_tokens: Schema.Number,
    prompt_tokens_details: Schema.optional(
      Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Schema.NullOr(Schema.Number)) }))
    )
  })
)

const ToolCall = Schema.Struct({
  id: Schema.String,
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})

const Completion = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  choices: Schema.Array(
    Schema.Struct({
      message: Schema.Struct({
        content: Schema.optional(Schema.NullOr(Schema.String)),
        tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCall)))
      }),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(Usage_)
})

const Chunk = Schema.Struct({
  id: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  choices: Schema.Array(
    Schema.Struct({
      delta: Schema.optional(
        Schema.NullOr(
          Schema.Struct({
            content: Schema.optional(Schema.NullOr(Schema.String)),
            tool_calls: Schema.optional(
              Schema.NullOr(
                Schema.Array(
                  Schema.Struct({
                    index: Schema.Number,
                    id: Schema.optional(Schema.NullOr(Schema.String)),
                    function: Schema.optional(
                      Schema.NullOr(
                        Schema.Struct({
                          name: Schema.optional(Schema.NullOr(Schema.String)),
                          arguments: Schema.optional(Schema.NullOr(Schema.String))
                        })
                      )
                    )
                  })
                )
              )
            )
          })
        )
      ),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    })
  ),
  usage: Schema.optional(Usage_)
})

type Message = Record<string, unknown>

const textOf = (parts: ReadonlyArray<{ readonly type: string }>): string =>
  parts
    .filter((part): part is Prompt.TextPart => part.type === "text")
    .map((part) => part.text)
    .join("")

const fileContent = (part: Prompt.FilePart): Record<string, unknown> | undefined => {
  if (!part.mediaType.startsWith("image/")) return undefined
  const url =
    part.data instanceof URL
      ? part.data.href
      : typeof part.data === "string"
        ? part.data.startsWith("data:") || part.data.startsWith("http")
          ? part.data
          : `data:${part.mediaType};base64,${part.data}`
        : `data:${part.mediaType};base64,${Base64.encode(part.data)}`
  return { type: "image_url", image_url: { url } }
}

const userContent = (parts: ReadonlyArray<Prompt.UserMessagePart>): string | Array<Record<string, unknown>> => {
  if (parts.every((part) => part.type === "text")) return textOf(parts)
  return parts.flatMap((part): Array<Record<string, unknown>> => {
    if (part.type === "text") return [{ type: "text", text: part.text }]
    const file = fileContent(part)
    return file === undefined ? [] : [file]
  })
}

/** Chat Completions messages for a prompt. @internal */
export const messagesOf = (prompt: Prompt.Prompt): Array<Message> => {
  const messages: Array<Message> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        messages.push({ role: "system", content: message.content })
        break
      case "user":
        messages.push({ role: "user", content: userContent(message.content) })
        break
      case "assistant": {
        const calls = message.content.filter(
          (part): part is Prompt.ToolCallPart => part.type === "tool-call" && !part.providerExecuted
        )
        const text = textOf(message.content)
        messages.push({
          role: "assistant",
          content: text === "" && calls.length > 0 ? null : text,
          ...(calls.length > 0 && {
            tool_calls: calls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.params ?? {}) }
            }))
          })
        })
        break
      }
      case "tool":
        for (const part of message.content) {
          if (part.type === "tool-result")
            messages.push({ role: "tool", tool_call_id: part.id, content: ModelHttp.resultText(part.result) })
        }
        break
    }
  }
  return messages
}

const toolsOf = (options: LanguageModel.ProviderOptions): Record<string, unknown> => {
  const choice = options.toolChoice
  const tools = ModelHttp.offeredTools(options).map((tool) => ({
    type: "function",
    function: { name: tool.name, description: Tool.getDescription(tool) ?? "", parameters: Tool.getJsonSchema(tool) }
  }))
  if (tools.length === 0) return {}
  const toolChoice =
    typeof choice === "string"
      ? choice
      : "tool" in choice
        ? { type: "function", function: { name: choice.tool } }
        : (choice.mode ?? "auto")
  return { tools, tool_choice: toolChoice }
}

const responseFormatOf = (options: LanguageModel.ProviderOptions): Record<string, unknown> =>
  options.responseFormat.type === "json"
    ? {
        response_format: {
          type: "json_schema",
          json_schema: {
            name: options.responseFormat.objectName,
            schema: Tool.getJsonSchemaFromSchema(options.responseFormat.schema)
          }
        }
      }
    : {}

const finishReason = (reason: string | null | undefined): Response.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    case null:
    case undefined:
      return "unknown"
    default:
      return "other"
  }
}

/** Counts the server's usage (of a whole response or a usage chunk) in `counted`. */
const countUsage = (counted: ModelHttp.Counted, raw: NonNullable<typeof Usage_.Type>): void => {
  counted.input = {
    inputTokens: raw.prompt_tokens,
    cachedInputTokens: raw.prompt_tokens_details?.cached_tokens ?? 0
  }
  counted.outputTokens = raw.completion_tokens
}

const parseArguments = (target: ModelHttp.Target, name: string, id: string, text: string) =>
  ModelHttp.decodeJson(
    target,
    Schema.Unknown,
    `the arguments of tool call ${JSON.stringify(name)} (${id})`,
    text || "{}"
  )

type Setup = ModelHttp.Setup<Options>

const requestOf = (setup: Setup, options: LanguageModel.ProviderOptions, stream: boolean) => {
  const body = {
    model: setup.options.model,
    messages: messagesOf(options.prompt),
    ...toolsOf(options),
    ...responseFormatOf(options),
    ...setup.options.body,
    ...(stream && { stream: true, stream_options: { include_usage: true } })
  }
  let request = HttpClientRequest.post(setup.url).pipe(
    HttpClientRequest.bodyJsonUnsafe(body),
    HttpClientRequest.setHeaders({
      accept: stream ? "text/event-stream" : "application/json",
      ...setup.options.headers
    })
  )
  if (setup.options.apiKey !== undefined) request = HttpClientRequest.bearerToken(request, setup.options.apiKey)
  return request
}

const generateText = (setup: Setup, options: LanguageModel.ProviderOptions) => {
  const target = setup.generateText
  const request = requestOf(setup, options, false)
  return Effect.gen(function* () {
    const completion = yield* ModelHttp.sendJson(target, request, Completion)
    const choice = completion.choices[0]
    if (choice === undefined) return yield* ModelHttp.invalidResponse(target, "the response has no choices")
    const counted = ModelHttp.counted()
    if (completion.usage != null) countUsage(counted, completion.usage)
    const parts: Array<Response.PartEncoded> = [
      { type: "response-metadata", id: completion.id, modelId: completion.model }
    ]
    if (choice.message.content != null && choice.message.content !== "") {
      counted.received += choice.message.content.length
      parts.push({ type: "text", text: choice.message.content })
    }
    for (const call of choice.message.tool_calls ?? []) {
      counted.received += call.function.arguments.length
      const params = yield* parseArguments(target, call.function.name, call.id, call.function.arguments)
      parts.push({ type: "tool-call", id: call.id, name: call.function.name, params })
    }
    parts.push(yield* ModelHttp.finish(setup, options, finishReason(choice.finish_reason), counted))
    return parts
  })
}

interface PendingCall {
  id: string
  name: string
  args: string
}

const streamText = (setup: Setup, options: LanguageModel.ProviderOptions, counted: ModelHttp.Counted) => {
  const target = setup.streamText
  const request = requestOf(setup, options, true)
  return Stream.unwrap(
    Effect.map(ModelHttp.send(target, request), (response) => {
      let started = false
      let textOpen = false
      let reason: Response.FinishReason = "unknown"
      const calls = new Map<number, PendingCall>()
      const onChunk = (chunk: typeof Chunk.Type): Array<Response.StreamPartEncoded> => {
        const parts: Array<Response.StreamPartEncoded> = []
        if (!started) {
          started = true
          parts.push({ type: "response-metadata", id: chunk.id, modelId: chunk.model })
        }
        if (chunk.usage != null) countUsage(counted, chunk.usage)
        for (const choice of chunk.choices) {
          const delta = choice.delta
          if (delta?.content != null && delta.content !== "") {
            if (!textOpen) parts.push({ type: "text-start", id: "text" })
            textOpen = true
            counted.received += delta.content.length
            parts.push({ type: "text-delta", id: "text", delta: delta.content })
          }
          for (const call of delta?.tool_calls ?? []) {
            let pending = calls.get(call.index)
            if (pending === undefined) {
              pending = { id: call.id ?? `call_${call.index}`, name: call.function?.name ?? "", args: "" }
              calls.set(call.index, pending)
              parts.push({ type: "tool-params-start", id: pending.id, name: pending.name })
            }
            const args = call.function?.arguments
            if (args != null && args !== "") {
              pending.args += args
              counted.received += args.length
              parts.push({ type: "tool-params-delta", id: pending.id, delta: args })
            }
          }
          if (choice.finish_reason != null) reason = finishReason(choice.finish_reason)
        }
        return parts
      }
      const onDone = Effect.gen(function* () {
        const parts: Array<Response.StreamPartEncoded> = []
        if (textOpen) parts.push({ type: "text-end", id: "text" })
        for (const call of calls.values()) {
          parts.push({ type: "tool-params-end", id: call.id })
          const params = yield* parseArguments(target, call.name, call.id, call.args)
          parts.push({ type: "tool-call", id: call.id, name: call.name, params })
        }
        parts.push(yield* ModelHttp.finish(setup, options, reason, counted))
        return parts
      })
      return ModelHttp.events(target, request, response, "[DONE]").pipe(
        Stream.mapEffect((event) =>
          event.data === "[DONE]"
            ? onDone
            : Effect.map(ModelHttp.decodeJson(target, Chunk, "a stream chunk", event.data), onChunk)
        ),
        Stream.flattenIterable
      )
    })
  )
}

const constructors = ModelHttp.constructors<Options>({
  module: "OpenAiCompat",
  defaultBaseUrl: "https://api.openai.com/v1",
  path: "/chat/completions",
  apiKeyVariable: "OPENAI_API_KEY",
  baseUrlVariableDefault: "https://api.openai.com/v1",
  baseUrlVariable: "OPENAI_BASE_URL",
  generateText,
  streamText
})

/**
 * An option the provider cannot use (a `timeout`, `idleTimeout` or `defaultRetryAfter` effect would refuse or
 * misread): building the provider dies with it, naming the provider and the option. One class for
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
 * `OPENAI_BASE_URL` (`variable`; `layerConfig` fails with it), naming it and its value, before any
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
 * A `LanguageModel` layer for an OpenAI-compatible server. A `baseUrl` that is not an http(s) URL,
 * or has a fragment, fails building it with {@link InvalidBaseUrl}. Every call reports its usage:
 * the server's counts (a body's `usage`, a stream's usage chunk), else an estimate at 4 characters a
 * token (the prompt's JSON as input, the text and tool arguments received as output) — when the
 * server sends no usage, and when a stream ends after its first part without its finish part before
 * its usage chunk came (cut, failed, or stopped by its consumer). A finish part's `usage` carries the
 * server's counts only (left out when it sent none); its `metadata.corral.costUsd`, the reported cost.
 *
 * @example
 * ```ts
 * import { OpenAiCompat } from "@corral/core"
 * import { Effect, Layer, Redacted } from "effect"
 * import { LanguageModel } from "effect/ai"
 * import { FetchHttpClient } from "effect/http"
 *
 * const model = OpenAiCompat.layer({
 *   model: "llama3.2",
 *   baseUrl: "http://127.0.0.1:11434/v1" // Ollama
 * }).pipe(Layer.provide(FetchHttpClient.layer))
 *
 * const program = LanguageModel.generateText({ prompt: "Say hi" }).pipe(Effect.provide(model))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = constructors.layer

/**
 * Like `layer`, with `apiKey` from `OPENAI_API_KEY` and `baseUrl` from `OPENAI_BASE_URL` when they
 * are set (values given in `options` win). As in OpenAI's SDK, `OPENAI_BASE_URL` is trimmed and an
 * empty value means unset (`https://api.openai.com/v1`); a query is kept after the path, as for the
 * option; a value that is not an http(s) URL, or has a fragment, fails building the layer with
 * `InvalidBaseUrl`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = constructors.layerConfig
