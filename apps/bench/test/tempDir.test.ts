import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { withTempDir } from "../src/lib/tempDir.ts"

describe("withTempDir", () => {
  it("removes the folder and what was written in it when the function returns", async () => {
    let seen = ""
    const value = await withTempDir("corral-bench-tempdir-test-", async (dir) => {
      seen = dir
      writeFileSync(join(dir, "file"), "x")
      return 7
    })
    expect(value).toBe(7)
    expect(seen).toContain("corral-bench-tempdir-test-")
    expect(existsSync(seen)).toBe(false)
  })

  it("removes the folder when the function fails, and passes the failure on", async () => {
    let seen = ""
    const run = withTempDir("corral-bench-tempdir-test-", async (dir) => {
      seen = dir
      throw new Error("boom")
    })
    await expect(run).rejects.toThrow("boom")
    expect(existsSync(seen)).toBe(false)
  })
})
