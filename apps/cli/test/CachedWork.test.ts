import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Ledger from "@corral/core/Ledger"
import * as RunLedger from "@corral/platform-node/RunLedger"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as CachedWork from "../src/CachedWork.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@x", ...args], { cwd, encoding: "utf8" }).trim()

/** main: base ← merged; side branch off base: unmerged. */
const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-cachedwork-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    sh(root, "commit", "--quiet", "--allow-empty", "-m", "base")
    const base = sh(root, "rev-parse", "HEAD")
    sh(root, "commit", "--quiet", "--allow-empty", "-m", "merged")
    const merged = sh(root, "rev-parse", "HEAD")
    sh(root, "checkout", "--quiet", "-b", "side", base)
    sh(root, "commit", "--quiet", "--allow-empty", "-m", "unmerged")
    const unmerged = sh(root, "rev-parse", "HEAD")
    sh(root, "checkout", "--quiet", "main")
    return { root, base, merged, unmerged }
  }),
  ({ root }) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

const reused = (repo: string, head: string, keys: ReadonlyArray<string>, asked: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger.Ledger
    const out: Record<string, boolean> = {}
    for (const key of asked) out[key] = Option.isSome(yield* ledger.lookup(key))
    return out
  }).pipe(Effect.provide(CachedWork.layer(repo, head, keys)))

describe("CachedWork", () => {
  it.effect("reuses a success whose commit is in the base, a success without a commit, and no other", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const runLedger = yield* RunLedger.RunLedger
      const record = (key: string, commit: string | undefined) =>
        runLedger.recordSuccess(key, key, { merge: commit === undefined ? "nothing to merge" : "merged", commit }, 1)
      yield* record("merged", repo.merged)
      yield* record("unmerged", repo.unmerged)
      yield* record("short", repo.merged.slice(0, 12))
      yield* record("gone", "0".repeat(40))
      yield* record("nothing", undefined)
      yield* runLedger.flush
      const keys = ["merged", "unmerged", "short", "gone", "nothing", "missing"]
      const expected = { merged: true, unmerged: false, short: true, gone: false, nothing: true, missing: false }
      const head = sh(repo.root, "rev-parse", "main")
      assert.deepStrictEqual(yield* reused(repo.root, head, keys, keys), expected)
      assert.deepStrictEqual(
        yield* reused(repo.root, head, ["merged", "unmerged"], keys),
        expected,
        "a key not read in advance is checked on its own"
      )
      assert.deepStrictEqual(yield* reused(repo.root, repo.base, keys, ["merged"]), { merged: false })
    }).pipe(Effect.provide(RunLedger.layerMemory))
  )
})
