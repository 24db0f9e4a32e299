import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as Usage from "@corral/core/Usage"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { CHUNK_BYTES, MAX_LINE_BYTES, MAX_WARNINGS, UsageTail } from "../../src/internal/processUsage.ts"

/** A usage file, a tail on it, and what the tail reported. */
const tailOn = (limit?: { readonly maxBytes: number }) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "corral-usage-")), "usage.jsonl")
  const usages: Array<Usage.Usage> = []
  const warnings: Array<string> = []
  const over: Array<number> = []
  const tail = new UsageTail(
    file,
    "a",
    (message) => Effect.sync(() => warnings.push(message)),
    (usage) => usages.push(usage),
    limit === undefined ? undefined : { maxBytes: limit.maxBytes, onOverLimit: (size) => over.push(size) }
  )
  const total = () => usages.reduce((sum, usage) => sum + usage.inputTokens, 0)
  return { file, tail, usages, warnings, over, total }
}

const usageLine = (tokens: number, padTo = 0) => {
  const line = JSON.stringify({ inputTokens: tokens, note: "" })
  return `${JSON.stringify({ inputTokens: tokens, note: "é".repeat(Math.max(0, (padTo - line.length) / 2)) })}\n`
}

describe("UsageTail", () => {
  it.effect("lines cut by the read pieces and by a read in progress are read whole, multibyte text too", () =>
    Effect.gen(function* () {
      const { file, tail, total, warnings } = tailOn()
      // Two-byte characters across the piece boundary, and a line cut where the next read resumes.
      const text = usageLine(1, CHUNK_BYTES - 1000) + usageLine(2, 3000)
      assert.strictEqual(Buffer.from(text)[CHUNK_BYTES]! & 0xc0, 0x80, "the piece ends inside a character")
      fs.writeFileSync(file, text)
      fs.appendFileSync(file, '{"inputTokens":')
      yield* tail.read(false)
      assert.strictEqual(total(), 3)
      fs.appendFileSync(file, "4}\n")
      yield* tail.read(false)
      assert.strictEqual(total(), 7)
      assert.deepStrictEqual(warnings, [])
    })
  )

  it.effect("a line over the cap is skipped with a warning naming agent, file, line and size; the rest is read", () =>
    Effect.gen(function* () {
      const { file, tail, total, warnings } = tailOn()
      fs.writeFileSync(file, `${usageLine(1)}${"x".repeat(3 * CHUNK_BYTES + 5)}\n${usageLine(2)}`)
      fs.appendFileSync(file, "y".repeat(MAX_LINE_BYTES + 1))
      yield* tail.read(true)
      assert.strictEqual(total(), 3)
      assert.deepStrictEqual(warnings, [
        `agent "a": ${file} line 2: ${3 * CHUNK_BYTES + 5} bytes, longer than ${MAX_LINE_BYTES} bytes; skipped`,
        `agent "a": ${file} line 4: ${MAX_LINE_BYTES + 1} bytes, longer than ${MAX_LINE_BYTES} bytes; skipped`
      ])
    })
  )

  it.effect("a line of exactly the cap is read", () =>
    Effect.gen(function* () {
      const { file, tail, total, warnings } = tailOn()
      const head = '{"inputTokens":5,"note":"'
      const line = `${head}${"x".repeat(MAX_LINE_BYTES - head.length - 2)}"}\n`
      assert.strictEqual(Buffer.byteLength(line), MAX_LINE_BYTES + 1)
      fs.writeFileSync(file, line)
      yield* tail.read(true)
      assert.deepStrictEqual(warnings, [])
      assert.strictEqual(total(), 5)
    })
  )

  it.effect("with maxBytes, nothing past it is read and a larger file is reported with its size", () =>
    Effect.gen(function* () {
      const { file, tail, total, over, warnings } = tailOn({ maxBytes: 100 })
      const lines = Array.from({ length: 10 }, () => usageLine(1)).join("")
      fs.writeFileSync(file, lines)
      yield* tail.read(true)
      const within = Math.floor(100 / usageLine(1).length)
      assert.strictEqual(total(), within)
      assert.deepStrictEqual(over, [lines.length])
      assert.deepStrictEqual(warnings, [], "the line cut at maxBytes is not read")
      assert.isFalse(tail.grew())
    })
  )

  it.effect("a file sends at most MAX_WARNINGS warnings, the last saying so", () =>
    Effect.gen(function* () {
      const { file, tail, warnings, total } = tailOn()
      fs.writeFileSync(file, `${"bad\n".repeat(MAX_WARNINGS + 30)}${usageLine(9)}`)
      yield* tail.read(true)
      assert.strictEqual(warnings.length, MAX_WARNINGS)
      assert.match(warnings.at(-1)!, /line 20: not JSON: bad \(later problems of this file are not reported\)$/)
      assert.strictEqual(total(), 9)
    })
  )
})
