import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Workspace } from "../src/Workspace.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const FILES = 40
const fileName = (i: number) => `src/f${i}.txt`

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-ws-racy-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    fs.mkdirSync(path.join(root, "src"))
    for (let i = 0; i < FILES; i++) fs.writeFileSync(path.join(root, fileName(i)), `file ${i}\n${"x".repeat(100)}\n`)
    sh(root, "add", ".")
    sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    return root
  }),
  (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

/** The mtime the worktree's index recorded for `file`, in seconds (`git ls-files --debug`). */
const recordedMtime = (dir: string, file: string) => {
  const found = /mtime: (\d+):(\d+)/.exec(sh(dir, "ls-files", "--debug", "--", file))
  if (found === null) throw new Error(`no index entry for ${file}`)
  return Number(found[1]) + Number(found[2]) / 1e9
}

const provide = <A, E>(effect: Effect.Effect<A, E, Workspace | Scope.Scope>) =>
  effect.pipe(Effect.provide(Workspace.layer))

describe("Workspace commit after a checkout in the same second", () => {
  it.live("commits same-size rewrites made in the checkout's second, and only the files changed", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const integration = yield* ws.integration({ repo, runId: "racy", author: undefined, committer: undefined })
        const handle = yield* ws.acquire({ repo, runId: "racy", agentId: "a", base: yield* integration.head() })
        const indices = [3, 17, 31]
        const rewritten = indices.map(fileName)
        for (const file of rewritten) {
          const at = path.join(handle.dir, file)
          const mtime = recordedMtime(handle.dir, file)
          fs.writeFileSync(at, fs.readFileSync(at, "utf8").replace("file", "FILE"))
          // As a tool that keeps file times would: to git's whole-second stat check, size and mtime
          // are unchanged, so only its racy-clean check (or ctime) can see the rewrite.
          fs.utimesSync(at, mtime, mtime)
        }
        fs.appendFileSync(path.join(handle.dir, fileName(5)), "grown\n")
        const made = yield* integration.commitAll(handle, "agent a")
        assert.isTrue(made.changed)
        const files = sh(handle.dir, "diff-tree", "--no-commit-id", "--name-only", "-r", made.commit).split("\n")
        assert.deepStrictEqual(files.sort(), [...rewritten, fileName(5)].sort())
        for (const i of indices)
          assert.strictEqual(sh(handle.dir, "show", `${made.commit}:${fileName(i)}`).split("\n")[0], `FILE ${i}`)
        assert.strictEqual(sh(handle.dir, "status", "--porcelain", "--untracked-files=all"), "")
        assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
      })
    )
  )
})
