import { assert, describe, it } from "@effect/vitest"
import { count } from "../src/Plural.ts"

describe("Plural.count", () => {
  it("takes the singular for 1 only", () => {
    assert.deepStrictEqual(
      [0, 1, 2].map((n) => count(n, "agent")),
      ["0 agents", "1 agent", "2 agents"]
    )
    assert.strictEqual(count(3, "process", "processes"), "3 processes")
  })
})
