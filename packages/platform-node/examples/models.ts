/**
 * Three agents asking a language model questions under one run's rate limit, each with its cost.
 *
 * - `ANTHROPIC_API_KEY` set → Anthropic's Messages API (`MODEL`, default `claude-3-5-haiku-latest`).
 * - `OPENAI_API_KEY` or `OPENAI_BASE_URL` set → an OpenAI-compatible server (`MODEL`, default
 *   `gpt-4o-mini`; e.g. `OPENAI_BASE_URL=http://127.0.0.1:11434/v1 MODEL=llama3.2` for Ollama).
 * - Otherwise a local fake server on 127.0.0.1 answers, so the example runs anywhere.
 *
 * Run: `pnpm demo:models`
 */
import { Agent, Anthropic, Corral, OpenAiCompat } from "@corral/core"
import * as FakeModelServer from "@corral/platform-node/FakeModelServer"
import { Console, Effect, Layer } from "effect"
import { LanguageModel } from "effect/ai"
import { FetchHttpClient } from "effect/http"

const env = process.env

const provider = Effect.gen(function* () {
  if (env.ANTHROPIC_API_KEY !== undefined) {
    const model = env.MODEL ?? "claude-3-5-haiku-latest"
    return { name: `Anthropic ${model}`, layer: Anthropic.layerConfig({ model, maxTokens: 200 }) }
  }
  if (env.OPENAI_API_KEY !== undefined || env.OPENAI_BASE_URL !== undefined) {
    const model = env.MODEL ?? "gpt-4o-mini"
    return { name: `OpenAI-compatible ${model}`, layer: OpenAiCompat.layerConfig({ model }) }
  }
  const server = yield* FakeModelServer.make()
  return {
    name: `local fake server at ${server.url}`,
    layer: OpenAiCompat.layer({
      model: "gpt-4o-mini",
      baseUrl: server.url,
      prices: { "gpt-4o-mini": { inputPerMillion: 0.15, outputPerMillion: 0.6 } }
    })
  }
})

const ask = (id: string, question: string) =>
  Agent.make(id, {
    rateLimit: "model",
    run: LanguageModel.generateText({ prompt: question }).pipe(Effect.map((response) => response.text))
  })

const program = Effect.gen(function* () {
  const { name, layer } = yield* provider
  yield* Console.log(`model: ${name}`)
  const result = yield* Corral.run(
    [
      ask("haiku", "Write a haiku about fences."),
      ask("capital", "What is the capital of Norway? One word."),
      ask("sum", "What is 17 + 25? Just the number.")
    ],
    { concurrency: 3, rateLimits: { model: { limit: 5, interval: "1 second" } } }
  ).pipe(Effect.provide(layer.pipe(Layer.provide(FetchHttpClient.layer))))
  for (const outcome of result.outcomes) {
    const answer = outcome._tag === "Succeeded" ? String(outcome.value).replace(/\s+/g, " ").trim() : outcome._tag
    const { inputTokens, outputTokens, costUsd } = outcome.usage
    yield* Console.log(
      `${outcome.agentId}: ${answer}  [${inputTokens} in, ${outputTokens} out, $${costUsd.toFixed(6)}]`
    )
  }
  yield* Console.log(`total: $${result.usage.costUsd.toFixed(6)}`)
})

Effect.runPromise(Effect.scoped(program)).catch((error) => {
  console.error(String(error))
  process.exitCode = 1
})
