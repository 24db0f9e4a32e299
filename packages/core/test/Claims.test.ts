import { Claims } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"

const request = (claims: Claims.Claims) => Result.getOrThrow(Claims.normalize(claims, { llm: 2 }))

/** What `normalize` answers for keys: each key normalized, one claim per key (a write wins), in first-named order. */
const referenceKeys = (write: ReadonlyArray<string>, read: ReadonlyArray<string>) => {
  const byKey = new Map<string, Claims.KeyClaim>()
  for (const [mode, raws] of [
    ["write", write],
    ["read", read]
  ] as const) {
    for (const raw of raws) {
      const { key, segments } = Result.getOrThrow(Claims.normalizeKey(raw))
      const id = segments.join("\u0000")
      const seen = byKey.get(id)
      if (seen === undefined || (seen.mode === "read" && mode === "write")) byKey.set(id, { key, segments, mode })
    }
  }
  return [...byKey.values()]
}

const RAW_KEYS = ["src", "src/", "./src", "src/a.ts", "src//a.ts", "src/b/../a.ts", "lib/x", "db:main", "k1", "k2"]

describe("Claims", () => {
  it("skips a hole in a list of keys, as a run's check of the claims' shape does", () => {
    const write: Array<string> = new Array(3)
    write[0] = "a"
    write[2] = "b"
    const read: Array<string> = new Array(2)
    read[1] = "c"
    assert.deepStrictEqual(
      request({ write, read }).keys.map((claim) => `${claim.mode} ${claim.key}`),
      ["write a", "write b", "read c"]
    )
  })

  it("property: normalize keeps one claim per key, a write over a read, in first-named order, on every call", () => {
    const keysArb = fc.array(fc.constantFrom(...RAW_KEYS), { maxLength: 20 })
    fc.assert(
      fc.property(keysArb, keysArb, (write, read) => {
        const expected = referenceKeys(write, read)
        for (let i = 0; i < 2; i++) {
          const normalized = Result.getOrThrow(Claims.normalize({ write, read }, {}))
          assert.deepStrictEqual(normalized.keys, expected)
          assert.deepStrictEqual(normalized.pools, [])
        }
      }),
      { numRuns: 300 }
    )
  })

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
