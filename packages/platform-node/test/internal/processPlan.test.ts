import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { findExecutable } from "../../src/internal/processPlan.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-plan-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const executable = (folder: string, name: string): string => {
  mkdirSync(folder, { recursive: true })
  const file = join(folder, name)
  writeFileSync(file, "#!/bin/sh\nexit 0\n")
  chmodSync(file, 0o755)
  return file
}

// The answers below hold whether or not a lookup is remembered from the one before (it is for a second).
describe("findExecutable", () => {
  it("looks a command up again when the file it found is gone", () => {
    const first = join(dir, "gone-a")
    const second = join(dir, "gone-b")
    const searchPath = [first, second].join(delimiter)
    const early = executable(first, "tool")
    const late = executable(second, "tool")
    assert.strictEqual(findExecutable("tool", searchPath, "/"), early)
    rmSync(early)
    assert.strictEqual(findExecutable("tool", searchPath, "/"), late)
    rmSync(late)
    assert.isUndefined(findExecutable("tool", searchPath, "/"))
  })

  it("does not remember a command it did not find", () => {
    const folder = join(dir, "missing")
    mkdirSync(folder)
    assert.isUndefined(findExecutable("later", folder, "/"))
    const file = executable(folder, "later")
    assert.strictEqual(findExecutable("later", folder, "/"), file)
  })

  it("keeps lookups of different PATHs apart", () => {
    const a = executable(join(dir, "path-a"), "same")
    const b = executable(join(dir, "path-b"), "same")
    assert.strictEqual(findExecutable("same", join(dir, "path-a"), "/"), a)
    assert.strictEqual(findExecutable("same", join(dir, "path-b"), "/"), b)
  })
})
