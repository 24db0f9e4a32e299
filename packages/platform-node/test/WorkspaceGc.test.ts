import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Workspace } from "../src/Workspace.ts"
import { killWhenReady, workspaceModule } from "./support/killedRun.ts"

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

/**
 * A run killed (SIGKILL) between `worktree add --no-checkout` and the checkout: a `git` first on its
 * PATH writes one file of a partial checkout into the worktree and kills the run when the checkout
 * (`read-tree`) starts, so the worktree has files but no index.
 */
const killedRun = `
import * as Effect from "effect/Effect"
import { Workspace } from ${JSON.stringify(workspaceModule)}
const repo = process.env.CORRAL_TEST_REPO
process.env.CORRAL_TEST_KILL_PID = String(process.pid)
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "halfway")
  const sparse = process.env.CORRAL_TEST_SPARSE === "1" ? ["pkg"] : undefined
  yield* ws.acquire({ repo, runId: "halfway", agentId: "agent", sparse })
  console.log("acquired")
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

/**
 * A `git` that, when called with `trigger` among its arguments, writes `file` (one file of a
 * partial checkout) in its working folder and kills the run; otherwise the real git.
 */
const killingGit = (realGit: string, trigger: string, file: string) => `#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = "${trigger}" ]; then
    printf 'partial\\n' > ${file}
    kill -9 "$CORRAL_TEST_KILL_PID"
    exit 1
  fi
done
exec ${realGit} "$@"
`

/** Runs `script` in a child with that `git` first on its PATH; succeeds when the child was killed. */
const killWhenGitRuns = (repo: string, script: string, trigger: string, file: string, sparse = false) =>
  Effect.callback<void, Error>((resume) => {
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), "corral-gc-git-"))
    const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()
    fs.writeFileSync(path.join(bin, "git"), killingGit(realGit, trigger, file), { mode: 0o755 })
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: packageDir,
      env: {
        ...process.env,
        CORRAL_TEST_REPO: repo,
        CORRAL_TEST_SPARSE: sparse ? "1" : "0",
        PATH: `${bin}${path.delimiter}${process.env.PATH}`
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("exit", (_code, signal) => {
      fs.rmSync(bin, { recursive: true, force: true })
      resume(signal === "SIGKILL" ? Effect.void : Effect.fail(new Error(`child was not killed: ${output}`)))
    })
  })

const killDuringCheckout = (repo: string, sparse: boolean) =>
  killWhenGitRuns(repo, killedRun, "read-tree", "a.txt", sparse)

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
      yield* killWhenReady(crashingRun, { CORRAL_TEST_REPO: repo })
      assert.isTrue(fs.existsSync(path.join(repo, ".git", "corral", "runs", "crashed.json")))
      const worktreesBefore = sh(repo, "worktree", "list")

      const indexes = () =>
        fs
          .readdirSync(path.join(repo, ".git", "worktrees"))
          .map((name) => path.join(repo, ".git", "worktrees", name, "index"))
          .filter((file) => fs.existsSync(file))
          .map((file) => `${file} ${fs.statSync(file).mtimeMs}`)
      const indexesBefore = indexes()

      const preview = yield* ws.gc({ repo, dryRun: true })
      assert.strictEqual(sh(repo, "worktree", "list"), worktreesBefore)
      assert.deepStrictEqual(indexes(), indexesBefore, "a dry run writes no worktree's index")

      const report = yield* ws.gc({ repo })
      assert.deepStrictEqual(targets(report.removed, repo), targets(preview.removed, repo))
      assert.deepStrictEqual(targets(report.removed, repo), [
        "branch:corral/crashed/clean",
        "branch:corral/crashed/merged",
        "lease:.git/corral/runs/crashed.json",
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
          "worktree:.corral/worktrees/crashed/dirty: the worktree has uncommitted changes or ignored files corral did not create"
        ]
      )
      const remaining = sh(repo, "worktree", "list", "--porcelain")
      assert.include(remaining, live.dir)
      assert.include(remaining, path.join(repo, ".corral", "worktrees", "crashed", "dirty"))
      assert.strictEqual(fs.readFileSync(path.join(live.dir, "c.txt"), "utf8"), "live edit\n")
      assert.isTrue(fs.existsSync(path.join(repo, ".git", "corral", "runs", "live.json")))
      assert.strictEqual(sh(repo, "status", "--porcelain"), "")
      assert.strictEqual(sh(repo, "symbolic-ref", "HEAD"), "refs/heads/main")
    }).pipe(Effect.provide(Workspace.layer))
  )

  for (const sparse of [false, true])
    it.live(
      `a run killed between worktree add --no-checkout and the ${sparse ? "sparse " : ""}checkout leaves nothing gc keeps`,
      () =>
        Effect.gen(function* () {
          const repo = yield* makeRepo
          yield* killDuringCheckout(repo, sparse)
          if (sparse) {
            const gitDir = path.join(repo, ".git", "worktrees", "agent")
            assert.include(fs.readFileSync(path.join(gitDir, "info", "sparse-checkout"), "utf8"), "/pkg/")
            assert.include(fs.readFileSync(path.join(gitDir, "config.worktree"), "utf8"), "sparseCheckout = true")
          }
          const dir = path.join(repo, ".corral", "worktrees", "halfway", "agent")
          assert.include(sh(repo, "worktree", "list", "--porcelain"), dir)
          assert.strictEqual(fs.readFileSync(path.join(dir, "a.txt"), "utf8"), "partial\n")
          assert.isFalse(fs.existsSync(path.join(repo, ".git", "worktrees", "agent", "index")))
          const ws = yield* Workspace
          const report = yield* ws.gc({ repo })
          assert.deepStrictEqual(report.kept, [])
          assert.deepStrictEqual(targets(report.removed, repo), [
            "branch:corral/halfway/agent",
            "lease:.git/corral/runs/halfway.json",
            "worktree:.corral/worktrees/halfway/agent"
          ])
          assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
          assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
          assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "halfway")))
          assert.isFalse(fs.existsSync(path.join(repo, ".git", "worktrees", "agent")))
          assert.strictEqual(sh(repo, "status", "--porcelain", "--untracked-files=all"), "")
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

  it.live("a live run is never touched, whatever state folder gc is pointed at or the run used", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const elsewhere = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-gc-state-")))
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "live")
      yield* ws.integration({ repo, runId: "live" })
      const handle = yield* ws.acquire({ repo, runId: "live", agentId: "worker", stateDir: elsewhere })
      for (const stateDir of [undefined, elsewhere, path.join(repo, ".corral")]) {
        const report = yield* ws.gc({ repo, stateDir })
        assert.deepStrictEqual(report.removed, [], `gc with stateDir ${stateDir}`)
      }
      assert.isTrue(fs.existsSync(path.join(handle.dir, "a.txt")))
      assert.include(sh(repo, "branch", "--list", "corral/live/*"), "corral/live/worker")
      assert.include(sh(repo, "branch", "--list", "corral/live/*"), "corral/live/integration")
    }).pipe(Effect.provide(Workspace.layer))
  )

  it.live("removes only branches corral recorded: a user's corral/notes branch survives", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      sh(repo, "branch", "corral/notes")
      sh(repo, "branch", "corral/old-run/integration")
      const ws = yield* Workspace
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* ws.registerRun(repo, "finished")
          yield* ws.integration({ repo, runId: "finished" })
        })
      )
      const report = yield* ws.gc({ repo })
      assert.deepStrictEqual(targets(report.removed, repo), ["branch:corral/finished/integration"])
      assert.include(sh(repo, "branch", "--list", "corral/*"), "corral/notes")
      assert.include(sh(repo, "branch", "--list", "corral/*"), "corral/old-run/integration")
    }).pipe(Effect.provide(Workspace.layer))
  )

  it.live("ignored files in a dead run's worktree are the user's; files corral copied in are not", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      fs.writeFileSync(path.join(repo, ".gitignore"), "build/\n.env\n")
      sh(repo, "add", ".gitignore")
      sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "ignore")
      fs.writeFileSync(path.join(repo, ".env"), "TOKEN=1\n")
      const ws = yield* Workspace
      const handle = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* ws.registerRun(repo, "dead")
          const handle = yield* ws.acquire({ repo, runId: "dead", agentId: "builder", keep: true, copyFiles: [".env"] })
          fs.mkdirSync(path.join(handle.dir, "build"))
          fs.writeFileSync(path.join(handle.dir, "build", "out.bin"), "artifact")
          return handle
        })
      )
      const first = yield* ws.gc({ repo })
      assert.deepStrictEqual(
        first.kept.map((item) => `${item.kind}:${show(repo, item.target)}`),
        ["worktree:.corral/worktrees/dead/builder", "branch:corral/dead/builder"]
      )
      assert.strictEqual(fs.readFileSync(path.join(handle.dir, "build", "out.bin"), "utf8"), "artifact")
      fs.rmSync(path.join(handle.dir, "build"), { recursive: true })
      const second = yield* ws.gc({ repo })
      assert.includeMembers(targets(second.removed, repo), [
        "worktree:.corral/worktrees/dead/builder",
        "branch:corral/dead/builder"
      ])
      assert.isFalse(fs.existsSync(handle.dir))
    }).pipe(Effect.provide(Workspace.layer))
  )
})
