import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"

const heap = new URL("../src/lib/heap.ts", import.meta.url).href

/**
 * Runs `body` in a child Node.js with `--expose-gc` (the bench's own flag) and a 16 MB semi-space
 * (so the body's young objects stay young until a collection), `settleYoung` imported, and returns
 * what it printed.
 */
const inChild = (body: string): string => {
  const script = `import { settleYoung } from ${JSON.stringify(heap)}
import { getHeapSpaceStatistics } from "node:v8"
const newSpaceUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_used_size
${body}`
  const child = spawnSync(
    process.execPath,
    ["--expose-gc", "--min-semi-space-size=16", "--max-semi-space-size=16", "--input-type=module", "-e", script],
    { encoding: "utf8" }
  )
  if (child.status !== 0) throw new Error(`child failed (${child.status}): ${child.stderr}`)
  return child.stdout.trim()
}

describe("settleYoung", () => {
  it("leaves the young generation empty when a dead object in the old generation still refers to young ones", () => {
    const out = inChild(`
let holder = { value: undefined }
gc({ type: "minor" })
gc({ type: "minor" })
holder.value = Array.from({ length: 100_000 }, (_, i) => ({ i }))
holder = undefined
const before = newSpaceUsed()
await settleYoung()
console.log(JSON.stringify({ before, after: newSpaceUsed() }))`)
    const { before, after } = JSON.parse(out) as { before: number; after: number }
    expect(before).toBeGreaterThan(3_000_000)
    expect(after).toBeLessThan(256 * 1024)
  })

  it("keeps what is still referenced", () => {
    const out = inChild(`
globalThis.kept = Array.from({ length: 100_000 }, (_, i) => ({ i }))
await settleYoung()
console.log(globalThis.kept.length + globalThis.kept[99_999].i)`)
    expect(out).toBe(String(100_000 + 99_999))
  })
})
