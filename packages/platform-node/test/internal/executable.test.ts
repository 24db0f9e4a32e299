import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { isExecutable, toolFinder } from "../../src/internal/executable.ts"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "corral-executable-"))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

const folder = (name: string, files: Record<string, number>): string => {
  const dir = path.join(root, name)
  fs.mkdirSync(dir)
  for (const [file, mode] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), "#!/bin/sh\n", { mode })
  return dir
}

describe("isExecutable", () => {
  it("is true only for an executable regular file", () => {
    const dir = folder("modes", { run: 0o755, data: 0o644 })
    expect(isExecutable(path.join(dir, "run"))).toBe(true)
    expect(isExecutable(path.join(dir, "data"))).toBe(false)
    expect(isExecutable(path.join(dir, "missing"))).toBe(false)
    expect(isExecutable(dir)).toBe(false)
  })
})

describe("toolFinder", () => {
  it("finds the file the variable names, else the first executable one in PATH", () => {
    const find = toolFinder("CORRAL_TEST_TOOL", "tool")
    const first = folder("first", { tool: 0o644 })
    const second = folder("second", { tool: 0o755 })
    const third = folder("third", { tool: 0o755 })
    const PATH = [first, second, third].join(path.delimiter)
    expect(find({ PATH })).toBe(path.join(second, "tool"))
    expect(find({ PATH, CORRAL_TEST_TOOL: path.join(third, "tool") })).toBe(path.join(third, "tool"))
    expect(find({ PATH, CORRAL_TEST_TOOL: path.join(first, "tool") })).toBeUndefined()
    expect(find({ PATH: first })).toBeUndefined()
  })

  it("looks again when the file it found last is gone", () => {
    const find = toolFinder("CORRAL_TEST_TOOL", "tool")
    const first = folder("gone", { tool: 0o755 })
    const second = folder("kept", { tool: 0o755 })
    const PATH = [first, second].join(path.delimiter)
    expect(find({ PATH })).toBe(path.join(first, "tool"))
    fs.rmSync(path.join(first, "tool"))
    expect(find({ PATH })).toBe(path.join(second, "tool"))
  })
})
