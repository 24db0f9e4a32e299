import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { upperHoldsWork } from "../../src/internal/workspaceOverlay.ts"

/** An upper folder holding the worktree's `.git` file and `files` (a path ending in `/` is an empty folder). */
const makeUpper = (files: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const top = fs.mkdtempSync(path.join(os.tmpdir(), "corral-upper-"))
      const upper = path.join(top, "upper")
      fs.mkdirSync(upper)
      fs.writeFileSync(path.join(upper, ".git"), "gitdir: /nowhere\n")
      for (const file of files) {
        const target = path.join(upper, file)
        if (file.endsWith("/")) fs.mkdirSync(target, { recursive: true })
        else {
          fs.mkdirSync(path.dirname(target), { recursive: true })
          fs.writeFileSync(target, "x")
        }
      }
      return upper
    }),
    (upper) => Effect.sync(() => execFileSync("rm", ["-rf", path.dirname(upper)]))
  )

describe("upperHoldsWork", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, ReadonlyArray<string>, boolean]> = [
    ["the .git file alone", [], [], false],
    ["a file", ["wip.txt"], [], true],
    ["a file deep in folders", ["src/x/one.ts"], [], true],
    ["an empty folder (it may be opaque)", ["src/y/"], [], true],
    ["a .git file below the top", ["sub/.git"], [], true],
    ["only the files corral copied in", [".env", "config/.env"], [".env", "config/.env"], false],
    ["a copied file and another", [".env", "config/.env", "config/local.json"], [".env", "config/.env"], true]
  ]
  for (const [name, files, copies, expected] of cases) {
    it.effect(`${name}: ${expected ? "work" : "nothing"}`, () =>
      Effect.gen(function* () {
        const upper = yield* makeUpper(files)
        assert.strictEqual(yield* upperHoldsWork(upper, copies), expected)
      }).pipe(Effect.scoped)
    )
  }

  it.effect("a missing upper folder holds nothing", () =>
    Effect.gen(function* () {
      const upper = yield* makeUpper([])
      assert.isFalse(yield* upperHoldsWork(path.join(upper, "gone"), []))
    }).pipe(Effect.scoped)
  )

  it.effect("a big upper folder of copies: the walk lets the event loop run between slices", () =>
    Effect.gen(function* () {
      const copies = Array.from({ length: 2_000 }, (_, i) => `d${i}/copied.env`)
      const upper = yield* makeUpper(copies)
      let turns = 0
      let walking = true
      const tick = () => {
        if (!walking) return
        turns++
        setImmediate(tick)
      }
      setImmediate(tick)
      const holds = yield* upperHoldsWork(upper, copies)
      walking = false
      assert.isFalse(holds)
      assert.isAtLeast(turns, 2)
    }).pipe(Effect.scoped)
  )

  it.effect("stops at the first entry of work: a folder beside it, too deep to read, is never read", () =>
    Effect.gen(function* () {
      const upper = yield* makeUpper(["wip.txt"])
      const tooLong = Array.from({ length: 20 }, () => "x".repeat(250)).join("/")
      execFileSync("mkdir", ["-p", path.join("deep", tooLong)], { cwd: upper })
      assert.isTrue(yield* upperHoldsWork(upper, []))
    }).pipe(Effect.scoped)
  )
})
