/**
 * `@corral/core` stays platform-free by construction: biome rejects Node built-in imports and Node
 * globals anywhere under `packages/core`, and the package compiles without Node's types
 * (`packages/core/tsconfig.build.json` has `types: []`; `pnpm check` and `pnpm build` compile it).
 */
import { execFile } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { root, tempDir } from "./helpers.ts"

/** Lints `source` as the file `path` of a copy of this repository's biome configuration. */
const lint = (path: string, source: string): Promise<{ readonly code: number; readonly output: string }> => {
  const dir = tempDir("corral-lint-")
  NodeFs.copyFileSync(NodePath.join(root, "biome.json"), NodePath.join(dir, "biome.json"))
  NodeFs.mkdirSync(NodePath.dirname(NodePath.join(dir, path)), { recursive: true })
  NodeFs.writeFileSync(NodePath.join(dir, path), source)
  return new Promise((resolve) => {
    execFile(
      NodePath.join(root, "node_modules/.bin/biome"),
      ["lint", path],
      { cwd: dir, encoding: "utf8" },
      (error, stdout, stderr) => {
        NodeFs.rmSync(dir, { recursive: true, force: true })
        resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr })
      }
    )
  })
}

describe("platform-free core", () => {
  it.each([
    ['import * as fs from "node:fs"\nexport const read = fs.readFileSync\n', "noNodejsModules"],
    ['import { join } from "path"\nexport const at = join("a", "b")\n', "noNodejsModules"],
    ["export const home = process.env.HOME\n", "noRestrictedGlobals"],
    ['export const bytes = Buffer.from("x")\n', "noRestrictedGlobals"],
    ["export const later = (f: () => void) => setImmediate(f)\n", "noRestrictedGlobals"]
  ])("lint rejects %j in packages/core", async (source, rule) => {
    const result = await lint("packages/core/src/Probe.ts", source)
    expect(result.code, result.output).not.toBe(0)
    expect(result.output).toContain(rule)
  })

  it("lint accepts the same code in @corral/platform-node", async () => {
    const result = await lint("packages/platform-node/src/Probe.ts", "export const home = process.env.HOME\n")
    expect(result.code, result.output).toBe(0)
  })

  it("compiles core without Node's types", () => {
    const config = JSON.parse(NodeFs.readFileSync(NodePath.join(root, "packages/core/tsconfig.build.json"), "utf8"))
    expect(config.compilerOptions.types).toEqual([])
  })
})
