import { Pricing } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"

describe("Pricing", () => {
  it("finds a model by exact name, else by the longest prefix; unknown models cost nothing", () => {
    const table: Pricing.Table = {
      "gpt-4o": { inputPerMillion: 2.5, outputPerMillion: 10 },
      "gpt-4o-mini": { inputPerMillion: 0.15, outputPerMillion: 0.6 }
    }
    assert.strictEqual(Pricing.lookup(table, "gpt-4o-mini-2024-07-18"), table["gpt-4o-mini"])
    assert.strictEqual(Pricing.lookup(table, "gpt-4o-2024-08-06"), table["gpt-4o"])
    assert.isUndefined(Pricing.lookup(table, "llama3.2"))
    assert.deepStrictEqual(Pricing.usage(table, "llama3.2", { inputTokens: 100, outputTokens: 10 }), {
      inputTokens: 100,
      outputTokens: 10,
      costUsd: 0
    })
  })

  it("prices cached reads and cache writes at their own rates, the rest of the input at the input rate", () => {
    const price: Pricing.Price = {
      inputPerMillion: 3,
      outputPerMillion: 15,
      cachedInputPerMillion: 0.3,
      cacheWritePerMillion: 3.75
    }
    const cost = Pricing.cost(price, {
      inputTokens: 1_000_000,
      outputTokens: 100_000,
      cachedInputTokens: 500_000,
      cacheWriteTokens: 200_000
    })
    assert.closeTo(cost, 300_000 * 3e-6 + 500_000 * 0.3e-6 + 200_000 * 3.75e-6 + 100_000 * 15e-6, 1e-12)
    assert.strictEqual(
      Pricing.cost(
        { inputPerMillion: 1, outputPerMillion: 2 },
        { inputTokens: 10, outputTokens: 0, cachedInputTokens: 10 }
      ),
      10e-6
    )
  })

  it("a user table overrides and extends the defaults", () => {
    const table = {
      ...Pricing.defaults,
      "gpt-4o": { inputPerMillion: 1, outputPerMillion: 1 },
      mine: { inputPerMillion: 5, outputPerMillion: 5 }
    }
    assert.strictEqual(Pricing.usage(table, "gpt-4o", { inputTokens: 1_000_000, outputTokens: 0 }).costUsd, 1)
    assert.strictEqual(Pricing.usage(table, "mine", { inputTokens: 0, outputTokens: 1_000_000 }).costUsd, 5)
  })
})
