import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Workspace } from "../src/Workspace.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-gc-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    for (const name of ["a", "b", "c"]) fs.writeFileSync(path.join(root, `${name}.txt`), `${name}\n`)
    sh(root, "add", ".")
    sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    return root
  }),
  (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

const packageDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)))
const workspaceModule = pathToFileURL(path.join(packageDir, "src", "Workspace.ts")).href

const crashingRun = `
import { writeFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import { Workspace } from ${JSON.stringify(workspaceModule)}
const repo = process.env.CORRAL_TEST_REPO
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "crashed")
  const integration = yield* ws.integration({ repo, runId: "crashed" })
  const acquire = (agentId) => ws.acquire({ repo, runId: "crashed", agentId })
  yield* acquire("clean")
  const dirty = yield* acquire("dirty")
  writeFileSync(dirty.dir + "/wip.txt", "work in progress")
  const unmerged = yield* acquire("unmerged")
  writeFileSync(unmerged.dir + "/a.txt", "committed but never merged")
  yield* integration.commitAll(unmerged, "unmerged work")
  const merged = yield* acquire("merged")
  writeFileSync(merged.dir + "/b.txt", "merged work")
  yield* integration.commitAll(merged, "merged work")
  yield* integration.merge(merged)
  console.log("ready")
  yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

const runAndKill = (repo: string) =>
  Effect.callback<void, Error>((resume) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", crashingRun], {
      cwd: packageDir,
      env: { ...process.env, CORRAL_TEST_REPO: repo },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) child.kill("SIGKILL")
    })
    child.on("exit", (_code, signal) =>
      resume(signal === "SIGKILL" ? Effect.void : Effect.fail(new Error(`child exited early: ${stderr}`)))
    )
  })

const show = (repo: string, target: string) => (path.isAbsolute(target) ? path.relative(repo, target) : target)

const targets = (items: ReadonlyArray<{ readonly kind: string; readonly target: string }>, repo: string) =>
  items.map((item) => `${item.kind}:${show(repo, item.target)}`).sort()

describe("Workspace.gc", () => {
  it.live("collects a crashed run's clean leftovers, keeps dirty or unmerged work and live runs", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "live")
      const live = yield* ws.acquire({ repo, runId: "live", agentId: "worker" })
      fs.writeFileSync(path.join(live.dir, "c.txt"), "live edit\n")
      yield* runAndKill(repo)
      assert.isTrue(fs.existsSync(path.join(repo, ".corral", "runs", "crashed.json")))
      const worktreesBefore = sh(repo, "worktree", "list")

      const preview = yield* ws.gc({ repo, dryRun: true })
      assert.strictEqual(sh(repo, "worktree", "list"), worktreesBefore)

      const report = yield* ws.gc({ repo })
      assert.deepStrictEqual(targets(report.removed, repo), targets(preview.removed, repo))
      assert.deepStrictEqual(targets(report.removed, repo), [
        "branch:corral/crashed/clean",
        "branch:corral/crashed/merged",
        "lease:.corral/runs/crashed.json",
        "worktree:.corral/worktrees/crashed/clean",
        "worktree:.corral/worktrees/crashed/merged",
        "worktree:.corral/worktrees/crashed/unmerged"
      ])
      assert.deepStrictEqual(
        report.kept.map((item) => `${item.kind}:${show(repo, item.target)}: ${item.reason}`).sort(),
        [
          "branch:corral/crashed/dirty: its worktree was kept",
          "branch:corral/crashed/integration: corral/crashed/integration holds merged work that none of your branches contain yet",
          "branch:corral/crashed/unmerged: corral/crashed/unmerged has commits that are not merged into corral/crashed/integration",
          "worktree:.corral/worktrees/crashed/dirty: the worktree has uncommitted changes"
        ]
      )
      const remaining = sh(repo, "worktree", "list", "--porcelain")
      assert.include(remaining, live.dir)
      assert.include(remaining, path.join(repo, ".corral", "worktrees", "crashed", "dirty"))
      assert.strictEqual(fs.readFileSync(path.join(live.dir, "c.txt"), "utf8"), "live edit\n")
      assert.isTrue(fs.existsSync(path.join(repo, ".corral", "runs", "live.json")))
      assert.strictEqual(sh(repo, "status", "--porcelain"), "")
      assert.strictEqual(sh(repo, "symbolic-ref", "HEAD"), "refs/heads/main")
    }).pipe(Effect.provide(Workspace.layer))
  )

  it.live("registerRun writes a lease with the pid and removes it when the scope closes", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const ws = yield* Workspace
      const lease = yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = yield* ws.registerRun(repo, "leased")
          const content = JSON.parse(fs.readFileSync(lease.path, "utf8"))
          assert.strictEqual(content.pid, process.pid)
          assert.strictEqual(content.hostname, os.hostname())
          assert.isNumber(content.heartbeatAt)
          assert.strictEqual(sh(repo, "status", "--porcelain", "--untracked-files=all"), "")
          const again = yield* Effect.flip(ws.registerRun(repo, "leased"))
          assert.strictEqual(again._tag, "InvalidWorkspaceId")
          return lease
        })
      )
      assert.isFalse(fs.existsSync(lease.path))
    }).pipe(Effect.provide(Workspace.layer))
  )
})
