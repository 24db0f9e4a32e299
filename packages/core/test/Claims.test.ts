import { Claims } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"

const request = (claims: Claims.Claims) => Result.getOrThrow(Claims.normalize(claims, { llm: 2 }))

describe("Claims", () => {
  it("normalizes paths and keeps named resources whole", () => {
    assert.deepStrictEqual(Result.getOrThrow(Claims.normalizeKey("./src//parser.ts")), {
      key: "src/parser.ts",
      segments: ["src", "parser.ts"]
    })
    assert.deepStrictEqual(Result.getOrThrow(Claims.normalizeKey("src/")), { key: "src/", segments: ["src"] })
    assert.deepStrictEqual(Result.getOrThrow(Claims.normalizeKey("src/a/../b.ts")), {
      key: "src/b.ts",
      segments: ["src", "b.ts"]
    })
    assert.deepStrictEqual(Result.getOrThrow(Claims.normalizeKey("file:docs/summary.md")), {
      key: "file:docs/summary.md",
      segments: ["file:docs/summary.md"]
    })
  })

  it("rejects empty keys, absolute paths and escapes, naming the key", () => {
    for (const [key, reason] of [
      ["", "must not be empty"],
      ["  ", "must not be empty"],
      ["/etc/passwd", "absolute paths"],
      ["C:\\Windows", "absolute paths"],
      ["../x", "escapes the repository"],
      ["a/../../x", "escapes the repository"],
      [".", "names the repository root"]
    ] as const) {
      const result = Claims.normalizeKey(key)
      assert.isTrue(Result.isFailure(result), key)
      if (Result.isFailure(result)) {
        assert.include(result.failure.message, reason)
        assert.include(result.failure.message, JSON.stringify(key))
      }
    }
  })

  it("a folder write conflicts with everything below it; reads never conflict with reads", () => {
    const folderWrite = request({ write: ["src/"] })
    assert.deepStrictEqual(Claims.conflicts(folderWrite, request({ read: ["src/parser.ts"] })), ["src/parser.ts"])
    assert.deepStrictEqual(Claims.conflicts(request({ read: ["src/"] }), request({ read: ["src/parser.ts"] })), [])
    assert.deepStrictEqual(Claims.conflicts(request({ write: ["src/a.ts"] }), request({ write: ["src/b.ts"] })), [])
    assert.deepStrictEqual(Claims.conflicts(request({ write: ["src"] }), request({ write: ["srcx/a.ts"] })), [])
    assert.deepStrictEqual(Claims.conflicts(request({ write: ["db:users"] }), request({ read: ["db:users"] })), [
      "db:users"
    ])
  })

  it("checks pools against the run's capacities and scopes them", () => {
    const scoped = Result.getOrThrow(Claims.normalize({ pools: { llm: 1 } }, { llm: 2 }, "run-1/"))
    assert.deepStrictEqual(scoped.pools, [{ pool: "run-1/llm", amount: 1, capacity: 2 }])
    assert.isTrue(Result.isFailure(Claims.normalize({ pools: { llm: 3 } }, { llm: 2 })))
    assert.isTrue(Result.isFailure(Claims.normalize({ pools: { llm: 0 } }, { llm: 2 })))
    assert.isTrue(Result.isFailure(Claims.normalize({ pools: { gpu: 1 } }, { llm: 2 })))
  })

  it("a write dominates a read of the same key in one request", () => {
    assert.deepStrictEqual(
      request({ read: ["a.ts"], write: ["a.ts"] }).keys.map((k) => `${k.key}:${k.mode}`),
      ["a.ts:write"]
    )
  })
})
