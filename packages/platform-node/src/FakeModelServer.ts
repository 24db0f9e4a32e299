/**
 * A local HTTP server on 127.0.0.1 that speaks the wire formats of OpenAI's Chat Completions
 * (`POST …/chat/completions`) and Anthropic's Messages (`POST …/messages`) APIs: whole JSON
 * responses, SSE streams, tool calls, and the failures real providers produce (429/529 with
 * `Retry-After`, 500, malformed JSON, a stream cut mid-way). Tests and demos run the real
 * providers (`OpenAiCompat`, `Anthropic`) against it with no key and no network.
 *
 * A `Handler` decides each reply; `echo` answers every request with the last user message, in the
 * format (and streaming mode) the request asked for.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * One request as the server saw it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: any
}

/**
 * What to answer: a JSON (or raw text) body with a status, or an SSE stream. `cutAfter` ends the
 * stream's connection abruptly after that many events.
 *
 * @since 0.1.0
 * @category models
 */
export type Reply =
  | {
      readonly _tag: "Body"
      readonly status: number
      readonly body: string
      readonly headers?: Readonly<Record<string, string>> | undefined
    }
  | { readonly _tag: "Sse"; readonly events: ReadonlyArray<SseEvent>; readonly cutAfter?: number | undefined }
  | { readonly _tag: "Hang" }

/**
 * @since 0.1.0
 * @category models
 */
export interface SseEvent {
  readonly event?: string | undefined
  readonly data: string
}

/**
 * @since 0.1.0
 * @category models
 */
export type Handler = (request: Request, call: number) => Reply

/**
 * A running server: its base URL (`http://127.0.0.1:<port>`) and every request received so far.
 *
 * @since 0.1.0
 * @category models
 */
export interface FakeModelServer {
  readonly url: string
  readonly requests: ReadonlyArray<Request>
}

/**
 * Never answers (the connection stays open until the server stops).
 *
 * @since 0.1.0
 * @category replies
 */
export const hang: Reply = { _tag: "Hang" }

/**
 * The URL of a port on 127.0.0.1 with nothing listening (bound, then closed), for refused
 * connections.
 *
 * @since 0.1.0
 * @category constructors
 */
export const closedPort: Effect.Effect<string> = Effect.callback<string>((resume) => {
  const server = Http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(`http://127.0.0.1:${port}`)))
  })
})

/**
 * A JSON reply.
 *
 * @since 0.1.0
 * @category replies
 */
export const json = (body: unknown, status = 200, headers?: Readonly<Record<string, string>>): Reply => ({
  _tag: "Body",
  status,
  body: JSON.stringify(body),
  headers
})

/**
 * A reply with a raw body, e.g. malformed JSON.
 *
 * @since 0.1.0
 * @category replies
 */
export const raw = (body: string, status = 200): Reply => ({ _tag: "Body", status, body })

/**
 * A 429 (or `status`, e.g. Anthropic's 529 "overloaded") with `Retry-After` in seconds when given.
 *
 * @since 0.1.0
 * @category replies
 */
export const rateLimited = (retryAfterSeconds?: number, status = 429): Reply =>
  json(
    { error: { type: "rate_limit_error", message: "Rate limit reached" } },
    status,
    retryAfterSeconds === undefined ? undefined : { "retry-after": String(retryAfterSeconds) }
  )

/**
 * An error status with a provider-style error body.
 *
 * @since 0.1.0
 * @category replies
 */
export const failure = (status: number, message: string): Reply =>
  json({ type: "error", error: { type: "api_error", message } }, status)

/**
 * @since 0.1.0
 * @category models
 */
export interface Answer {
  readonly text?: string | undefined
  readonly toolCalls?:
    | ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>
    | undefined
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cachedInputTokens?: number | undefined
  readonly model?: string | undefined
}

const openAiUsage = (answer: Answer) => ({
  prompt_tokens: answer.inputTokens ?? 0,
  completion_tokens: answer.outputTokens ?? 0,
  total_tokens: (answer.inputTokens ?? 0) + (answer.outputTokens ?? 0),
  prompt_tokens_details: { cached_tokens: answer.cachedInputTokens ?? 0 }
})

/**
 * A Chat Completions response body.
 *
 * @since 0.1.0
 * @category replies
 */
export const openAi = (answer: Answer): Reply =>
  json({
    id: "chatcmpl-fake",
    object: "chat.completion",
    model: answer.model ?? "fake-model",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: answer.text ?? null,
          ...(answer.toolCalls !== undefined && {
            tool_calls: answer.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.params) }
            }))
          })
        },
        finish_reason: answer.toolCalls !== undefined ? "tool_calls" : "stop"
      }
    ],
    usage: openAiUsage(answer)
  })

const chunks = (text: string): Array<string> => text.match(/.{1,4}/gs) ?? []

/**
 * A Chat Completions SSE stream: text in small deltas, tool-call arguments split in two, a usage
 * chunk, then `[DONE]`.
 *
 * @since 0.1.0
 * @category replies
 */
export const openAiStream = (answer: Answer, cutAfter?: number): Reply => {
  const base = { id: "chatcmpl-fake", object: "chat.completion.chunk", model: answer.model ?? "fake-model" }
  const data: Array<unknown> = [{ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" } }] }]
  for (const piece of chunks(answer.text ?? ""))
    data.push({ ...base, choices: [{ index: 0, delta: { content: piece } }] })
  answer.toolCalls?.forEach((call, index) => {
    const args = JSON.stringify(call.params)
    const half = Math.floor(args.length / 2)
    data.push({
      ...base,
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              { index, id: call.id, type: "function", function: { name: call.name, arguments: args.slice(0, half) } }
            ]
          }
        }
      ]
    })
    data.push({
      ...base,
      choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: args.slice(half) } }] } }]
    })
  })
  data.push({
    ...base,
    choices: [{ index: 0, delta: {}, finish_reason: answer.toolCalls !== undefined ? "tool_calls" : "stop" }]
  })
  data.push({ ...base, choices: [], usage: openAiUsage(answer) })
  const events: Array<SseEvent> = data.map((item) => ({ data: JSON.stringify(item) }))
  events.push({ data: "[DONE]" })
  return { _tag: "Sse", events, cutAfter }
}

const anthropicUsage = (answer: Answer) => ({
  input_tokens: (answer.inputTokens ?? 0) - (answer.cachedInputTokens ?? 0),
  output_tokens: answer.outputTokens ?? 0,
  cache_read_input_tokens: answer.cachedInputTokens ?? 0,
  cache_creation_input_tokens: 0
})

/**
 * An Anthropic Messages response body. `inputTokens` counts cached tokens too; the body splits
 * them into `input_tokens` and `cache_read_input_tokens` as Anthropic does.
 *
 * @since 0.1.0
 * @category replies
 */
export const anthropic = (answer: Answer): Reply =>
  json({
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model: answer.model ?? "fake-model",
    content: [
      ...(answer.text === undefined ? [] : [{ type: "text", text: answer.text }]),
      ...(answer.toolCalls ?? []).map((call) => ({
        type: "tool_use",
        id: call.id,
        name: call.name,
        input: call.params
      }))
    ],
    stop_reason: answer.toolCalls !== undefined ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: anthropicUsage(answer)
  })

/**
 * An Anthropic Messages SSE stream (`message_start`, content blocks with deltas, `message_delta`
 * with the output tokens, `message_stop`).
 *
 * @since 0.1.0
 * @category replies
 */
export const anthropicStream = (answer: Answer, cutAfter?: number): Reply => {
  const usage = anthropicUsage(answer)
  const events: Array<SseEvent> = []
  const push = (event: string, data: object) => events.push({ event, data: JSON.stringify({ type: event, ...data }) })
  push("message_start", {
    message: {
      id: "msg_fake",
      type: "message",
      role: "assistant",
      model: answer.model ?? "fake-model",
      content: [],
      stop_reason: null,
      usage: { ...usage, output_tokens: 1 }
    }
  })
  let index = 0
  if (answer.text !== undefined) {
    push("content_block_start", { index, content_block: { type: "text", text: "" } })
    for (const piece of chunks(answer.text))
      push("content_block_delta", { index, delta: { type: "text_delta", text: piece } })
    push("content_block_stop", { index })
    index++
  }
  for (const call of answer.toolCalls ?? []) {
    const args = JSON.stringify(call.params)
    const half = Math.floor(args.length / 2)
    push("content_block_start", { index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } })
    push("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: args.slice(0, half) } })
    push("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: args.slice(half) } })
    push("content_block_stop", { index })
    index++
  }
  push("message_delta", {
    delta: { stop_reason: answer.toolCalls !== undefined ? "tool_use" : "end_turn", stop_sequence: null },
    usage: { output_tokens: usage.output_tokens }
  })
  push("message_stop", {})
  return { _tag: "Sse", events, cutAfter }
}

const lastUserText = (body: any): string => {
  const messages: Array<any> = Array.isArray(body?.messages) ? body.messages : []
  const last = [...messages].reverse().find((message) => message?.role === "user")
  if (typeof last?.content === "string") return last.content
  if (Array.isArray(last?.content))
    return last.content
      .filter((part: any) => part?.type === "text")
      .map((part: any) => part.text)
      .join("")
  return ""
}

/**
 * Answers every request with `echo: <last user message>`, in the wire format of the path
 * (`/messages` → Anthropic, else Chat Completions), streaming when the request asks to. Tokens are
 * a quarter of the characters, rounded up.
 *
 * @since 0.1.0
 * @category handlers
 */
export const echo: Handler = (request) => {
  const prompt = lastUserText(request.body)
  const answer: Answer = {
    text: `echo: ${prompt}`,
    inputTokens: Math.ceil(JSON.stringify(request.body?.messages ?? []).length / 4),
    outputTokens: Math.ceil((prompt.length + 6) / 4),
    model: request.body?.model
  }
  const anthropicFormat = request.path.endsWith("/messages")
  if (request.body?.stream === true) return anthropicFormat ? anthropicStream(answer) : openAiStream(answer)
  return anthropicFormat ? anthropic(answer) : openAi(answer)
}

const readBody = (req: Http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")))
    req.on("error", reject)
  })

const respond = (res: Http.ServerResponse, reply: Reply): void => {
  if (reply._tag === "Hang") return
  if (reply._tag === "Body") {
    res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
    res.end(reply.body)
    return
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  const events = reply.cutAfter === undefined ? reply.events : reply.events.slice(0, reply.cutAfter)
  const text = events.map(
    (event) => `${event.event === undefined ? "" : `event: ${event.event}\n`}data: ${event.data}\n\n`
  )
  if (reply.cutAfter === undefined) {
    res.end(text.join(""))
    return
  }
  res.write(text.join(""), () => res.socket?.destroy())
}

/**
 * Starts a server on 127.0.0.1 (an ephemeral port) for the scope; closing the scope stops it and
 * drops open connections.
 *
 * @example
 * ```ts
 * import { OpenAiCompat } from "@corral/core"
 * import { FakeModelServer } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* FakeModelServer.make((_, call) =>
 *     call === 1 ? FakeModelServer.rateLimited(2) : FakeModelServer.openAi({ text: "hi", inputTokens: 5, outputTokens: 1 })
 *   )
 *   return OpenAiCompat.layer({ model: "gpt-4o-mini", baseUrl: server.url })
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (handler: Handler = echo): Effect.Effect<FakeModelServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<FakeModelServer>((resume) => {
      const requests: Array<Request> = []
      const server = Http.createServer((req, res) => {
        readBody(req).then(
          (text) => {
            let body: unknown
            try {
              body = text === "" ? undefined : JSON.parse(text)
            } catch {
              body = text
            }
            const request: Request = { path: req.url ?? "/", headers: req.headers as Record<string, string>, body }
            requests.push(request)
            respond(res, handler(request, requests.length))
          },
          () => res.destroy()
        )
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed(Object.assign({ url: `http://127.0.0.1:${port}`, requests }, { server })))
      })
    }),
    (running) =>
      Effect.callback<void>((resume) => {
        const server = (running as unknown as { server: Http.Server }).server
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
