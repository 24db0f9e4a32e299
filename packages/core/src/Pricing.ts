/**
 * Model prices: what a call cost in USD, from the tokens a provider reported. The providers
 * (`OpenAiCompat`, `Anthropic`) look the model up in `defaults` merged with the `prices` the user
 * passes, so a user adds a model or corrects a price without waiting for a release.
 *
 * A model name matches an entry with the same name or, failing that, the longest entry that is a
 * prefix of it (`gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`). A model with no entry costs 0.
 *
 * @since 0.1.0
 */
import type * as Usage from "./Usage.ts"

/**
 * USD per million tokens. Cached input (a prompt-cache hit) costs `cachedInputPerMillion`, which
 * defaults to `inputPerMillion`; `cacheWritePerMillion` (Anthropic's cache creation) defaults to
 * `inputPerMillion` too.
 *
 * @since 0.1.0
 * @category models
 */
export interface Price {
  readonly inputPerMillion: number
  readonly outputPerMillion: number
  readonly cachedInputPerMillion?: number | undefined
  readonly cacheWritePerMillion?: number | undefined
}

/**
 * Prices by model name (or name prefix).
 *
 * @since 0.1.0
 * @category models
 */
export type Table = Readonly<Record<string, Price>>

/**
 * Token counts of one call, split the way providers bill them. `inputTokens` counts every prompt
 * token, including `cachedInputTokens` and `cacheWriteTokens`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tokens {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens?: number | undefined
  readonly cacheWriteTokens?: number | undefined
}

/**
 * List prices published by OpenAI and Anthropic for a few common models (USD per million tokens,
 * as of 2025). Pass `prices` to a provider to add models or override these.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaults: Table = {
  "gpt-4o": { inputPerMillion: 2.5, outputPerMillion: 10, cachedInputPerMillion: 1.25 },
  "gpt-4o-mini": { inputPerMillion: 0.15, outputPerMillion: 0.6, cachedInputPerMillion: 0.075 },
  "gpt-4.1": { inputPerMillion: 2, outputPerMillion: 8, cachedInputPerMillion: 0.5 },
  "gpt-4.1-mini": { inputPerMillion: 0.4, outputPerMillion: 1.6, cachedInputPerMillion: 0.1 },
  "gpt-4.1-nano": { inputPerMillion: 0.1, outputPerMillion: 0.4, cachedInputPerMillion: 0.025 },
  "gpt-5": { inputPerMillion: 1.25, outputPerMillion: 10, cachedInputPerMillion: 0.125 },
  "gpt-5-mini": { inputPerMillion: 0.25, outputPerMillion: 2, cachedInputPerMillion: 0.025 },
  "o4-mini": { inputPerMillion: 1.1, outputPerMillion: 4.4, cachedInputPerMillion: 0.275 },
  "claude-3-5-haiku": {
    inputPerMillion: 0.8,
    outputPerMillion: 4,
    cachedInputPerMillion: 0.08,
    cacheWritePerMillion: 1
  },
  "claude-sonnet-4": {
    inputPerMillion: 3,
    outputPerMillion: 15,
    cachedInputPerMillion: 0.3,
    cacheWritePerMillion: 3.75
  },
  "claude-opus-4": {
    inputPerMillion: 15,
    outputPerMillion: 75,
    cachedInputPerMillion: 1.5,
    cacheWritePerMillion: 18.75
  }
}

/**
 * The price of `model` in `table`: the exact entry, else the longest entry that prefixes it.
 *
 * @example
 * ```ts
 * import { Pricing } from "@corral/core"
 *
 * Pricing.lookup(Pricing.defaults, "gpt-4o-mini-2024-07-18") // the "gpt-4o-mini" price
 * ```
 * @since 0.1.0
 * @category pricing
 */
export const lookup = (table: Table, model: string): Price | undefined => {
  const exact = table[model]
  if (exact !== undefined) return exact
  let best: string | undefined
  for (const name of Object.keys(table)) {
    if (model.startsWith(name) && (best === undefined || name.length > best.length)) best = name
  }
  return best === undefined ? undefined : table[best]
}

/**
 * The cost in USD of `tokens` at `price` (0 without a price).
 *
 * @since 0.1.0
 * @category pricing
 */
export const cost = (price: Price | undefined, tokens: Tokens): number => {
  if (price === undefined) return 0
  const cached = tokens.cachedInputTokens ?? 0
  const written = tokens.cacheWriteTokens ?? 0
  const fresh = Math.max(0, tokens.inputTokens - cached - written)
  return (
    (fresh * price.inputPerMillion +
      cached * (price.cachedInputPerMillion ?? price.inputPerMillion) +
      written * (price.cacheWritePerMillion ?? price.inputPerMillion) +
      tokens.outputTokens * price.outputPerMillion) /
    1_000_000
  )
}

/**
 * corral's `Usage` for one call of `model`, priced from `table`.
 *
 * @example
 * ```ts
 * import { Pricing } from "@corral/core"
 *
 * const usage = Pricing.usage({ ...Pricing.defaults, "my-model": { inputPerMillion: 1, outputPerMillion: 2 } },
 *   "my-model", { inputTokens: 1000, outputTokens: 500 })
 * // { inputTokens: 1000, outputTokens: 500, costUsd: 0.002 }
 * ```
 * @since 0.1.0
 * @category pricing
 */
export const usage = (table: Table, model: string, tokens: Tokens): Usage.Usage => ({
  inputTokens: tokens.inputTokens,
  outputTokens: tokens.outputTokens,
  costUsd: cost(lookup(table, model), tokens)
})
