import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { conePatterns, normalizeFolders } from "../../src/internal/workspaceSparse.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

describe("workspaceSparse", () => {
  it("writes the patterns git's own `sparse-checkout set --cone` writes", () => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), "corral-cone-"))
    try {
      sh(repo, "init", "--quiet")
      const sets: ReadonlyArray<ReadonlyArray<string>> = [
        ["src"],
        ["src/pkg0"],
        ["src/pkg1/mod2", "src/pkg0", "docs"],
        ["a/b/c/d", "a/b", "a/x/y"],
        ["-dash", "with space/inner", "ünïcode/ö"],
        ["a/b/c", "a/b/c/d", "e"]
      ]
      for (const folders of sets) {
        sh(repo, "sparse-checkout", "set", "--cone", "--", ...folders)
        const expected = fs.readFileSync(path.join(repo, ".git", "info", "sparse-checkout"), "utf8")
        const normalized = Effect.runSync(normalizeFolders("agent", folders))
        assert.strictEqual(conePatterns(normalized), expected, folders.join(", "))
      }
    } finally {
      fs.rmSync(repo, { recursive: true, force: true })
    }
  })

  it.effect("normalizes folders as cone mode reads them and names the agent and folder it refuses", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* normalizeFolders("a", ["src//pkg/", "./docs", "src/pkg", "b/./c"]), [
        "b/c",
        "docs",
        "src/pkg"
      ])
      for (const folder of ["src/*", "a?", "[ab]", "back\\slash", "../up", "a/../../b", "", ".", "/", ".git/hooks"]) {
        const error = yield* Effect.flip(normalizeFolders("fmt-1", ["ok", folder]))
        assert.strictEqual(error._tag, "InvalidSparseFolder")
        assert.strictEqual(error.folder, folder)
        assert.include(error.message, `agent fmt-1: invalid sparse folder ${JSON.stringify(folder)}`)
      }
    })
  )
})
