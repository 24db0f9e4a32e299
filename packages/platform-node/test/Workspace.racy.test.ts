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

const indexSecond = (dir: string) => {
  const gitDir = sh(dir, "rev-parse", "--absolute-git-dir")
  return Number(fs.statSync(path.join(gitDir, "index"), { bigint: true }).mtimeNs / 1_000_000_000n)
}

/** Resolves once the clock's second is past `second` (at most a second: waiting for the clock itself). */
const afterSecond = (second: number) =>
  Effect.promise(async () => {
    while (Math.floor(Date.now() / 1000) <= second) await new Promise((resolve) => setTimeout(resolve, 20))
  })

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
          fs.writeFileSync(at, fs.readFileSync(at, "utf8").replace("file", "FILE"))
        }
        fs.appendFileSync(path.join(handle.dir, fileName(5)), "grown\n")
        yield* afterSecond(indexSecond(handle.dir))
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
