import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { Workspace } from "../src/Workspace.ts"
import { workspaceModule } from "./support/killedRun.ts"

/**
 * `git worktree add` writes the new worktree's administrative folder, locked ("initializing"), with
 * the null object id as a placeholder `HEAD`, then sets `HEAD` in a child git (`symbolic-ref`). Killed
 * (SIGKILL) in between, it leaves that folder for good: `git worktree prune` skips a locked worktree,
 * `git worktree remove --force` refuses one, and every command that reads all refs of all worktrees
 * (`rev-list --all`, `fetch`'s connectivity check, `gc`) dies with `fatal: bad object
 * worktrees/<name>/HEAD`. These tests kill a real `worktree add` at that point: a `git` first on the
 * PATH points `worktree add` at an exec path whose `git` kills the add (and, for gc's test, the run)
 * when the add starts its `symbolic-ref` child.
 */

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()
const realExecPath = execFileSync(realGit, ["--exec-path"], { encoding: "utf8" }).trim()
const packageDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)))

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-killed-add-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    fs.writeFileSync(path.join(root, "a.txt"), "a\n")
    sh(root, "add", ".")
    sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    return root
  }),
  (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

/**
 * A temporary folder holding a `git` for the PATH that runs `worktree add` with the exec path
 * `exec/`, whose `git` runs `before` (a shell snippet; `$1` is the git command the add starts, `bin`
 * the folder) and then the real git; every other command is the real git.
 */
const addHookBin = (prefix: string, before: (bin: string) => string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const bin = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
      fs.mkdirSync(path.join(bin, "exec"))
      fs.writeFileSync(
        path.join(bin, "git"),
        `#!/bin/sh\ncase " $* " in *" worktree add "*) export GIT_EXEC_PATH="${bin}/exec";; esac\nexec "${realGit}" "$@"\n`,
        { mode: 0o755 }
      )
      fs.writeFileSync(
        path.join(bin, "exec", "git"),
        `#!/bin/sh\n${before(bin)}GIT_EXEC_PATH="${realExecPath}" exec "${realGit}" "$@"\n`,
        { mode: 0o755 }
      )
      return bin
    }),
    (bin) => Effect.sync(() => fs.rmSync(bin, { recursive: true, force: true }))
  )

/**
 * An {@link addHookBin} that kills the add (its parent) and the pids in `$CORRAL_TEST_KILL_PID` when
 * the add runs `symbolic-ref`.
 */
const killingBin = addHookBin(
  "corral-killed-add-bin-",
  () => `if [ "$1" = symbolic-ref ]; then kill -9 $CORRAL_TEST_KILL_PID "$PPID"; exit 1; fi\n`
)

/**
 * An {@link addHookBin} that, when the add runs `symbolic-ref`, deletes the add's administrative
 * folder `$CORRAL_TEST_ADMIN` the first `times` times, as another process's `git worktree prune` does
 * when it lands between the add's `mkdir` and its writing the folder's `locked` or `gitdir` file.
 */
const pruningBin = (times: number) =>
  addHookBin(
    "corral-pruned-add-bin-",
    (bin) =>
      `if [ "$1" = symbolic-ref ] && [ "$(ls "${bin}/pruned" 2>/dev/null | wc -l)" -lt ${times} ]; then\n` +
      `  mkdir -p "${bin}/pruned" && mktemp -p "${bin}/pruned" >/dev/null && rm -rf "$CORRAL_TEST_ADMIN"\nfi\n`
  )

/** How many times {@link pruningBin}'s `bin` deleted an add's administrative folder. */
const prunedCount = (bin: string) =>
  fs.existsSync(path.join(bin, "pruned")) ? fs.readdirSync(path.join(bin, "pruned")).length : 0

/** Runs `effect` with `bin` first on the PATH of the git commands it starts. */
const withPath = <A, E, R>(bin: string, effect: Effect.Effect<A, E, R>, admin = "") =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const before = process.env.PATH
      process.env.PATH = `${bin}${path.delimiter}${before}`
      process.env.CORRAL_TEST_ADMIN = admin
      return before
    }),
    () => effect,
    (before) =>
      Effect.sync(() => {
        process.env.PATH = before
        delete process.env.CORRAL_TEST_ADMIN
      })
  )

/** A run that registers itself and acquires one workspace (its `worktree add` kills it). */
const killedRun = `
import * as Effect from "effect/Effect"
import { Workspace } from ${JSON.stringify(workspaceModule)}
const repo = process.env.CORRAL_TEST_REPO
process.env.CORRAL_TEST_KILL_PID = String(process.pid)
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "killed")
  yield* ws.acquire({ repo, runId: "killed", agentId: "agent" })
  console.log("acquired")
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

/** Runs {@link killedRun} with `bin` first on its PATH; succeeds when it was killed. */
const runKilled = (repo: string, bin: string) =>
  Effect.callback<void, Error>((resume) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", killedRun], {
      cwd: packageDir,
      env: { ...process.env, CORRAL_TEST_REPO: repo, PATH: `${bin}${path.delimiter}${process.env.PATH}` },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("exit", (_code, signal) =>
      resume(signal === "SIGKILL" ? Effect.void : Effect.fail(new Error(`the run was not killed: ${output}`)))
    )
  })

const placeholder = "0".repeat(40)

/** The administrative folders of the repository's worktrees. */
const adminFolders = (repo: string) => {
  const dir = path.join(repo, ".git", "worktrees")
  return fs.existsSync(dir) ? fs.readdirSync(dir) : []
}

/** Fails unless every ref of every worktree can be read (what `fetch`'s connectivity check needs). */
const assertAllRefsReadable = (repo: string) => {
  const result = Effect.runSync(
    Effect.exit(Effect.try(() => execFileSync("git", ["rev-list", "--all"], { cwd: repo, stdio: "pipe" })))
  )
  assert.isTrue(Exit.isSuccess(result), `git rev-list --all fails in ${repo}: ${String(result)}`)
}

describe("a git worktree add killed after its placeholder HEAD", () => {
  it.live("gc of the killed run removes the locked placeholder worktree, so all refs read again", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const bin = yield* killingBin
      yield* runKilled(repo, bin)
      assert.deepStrictEqual(adminFolders(repo), ["agent"])
      const admin = path.join(repo, ".git", "worktrees", "agent")
      assert.strictEqual(fs.readFileSync(path.join(admin, "HEAD"), "utf8").trim(), placeholder)
      assert.strictEqual(fs.readFileSync(path.join(admin, "locked"), "utf8").trim(), "initializing")
      const ws = yield* Workspace
      yield* ws.gc({ repo })
      assert.deepStrictEqual(adminFolders(repo), [])
      assertAllRefsReadable(repo)
      assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
      assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "killed")))
    }).pipe(Effect.provide(Workspace.layer))
  )

  it.live("an acquire whose add was killed fails and leaves no placeholder worktree behind", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const bin = yield* killingBin
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "survived")
      const acquired = yield* withPath(
        bin,
        Effect.exit(Effect.scoped(ws.acquire({ repo, runId: "survived", agentId: "agent" })))
      )
      assert.isTrue(Exit.isFailure(acquired), "the acquire succeeded although its worktree add was killed")
      assert.deepStrictEqual(adminFolders(repo), [])
      assertAllRefsReadable(repo)
      assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
      assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "survived", "agent")))
    }).pipe(Effect.provide(Workspace.layer))
  )
})

describe("a git worktree add whose administrative folder another process prunes meanwhile", () => {
  it.live("the acquire adds the worktree again and succeeds", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const bin = yield* pruningBin(2)
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "pruned")
      const admin = path.join(repo, ".git", "worktrees", "agent")
      const dir = yield* withPath(
        bin,
        Effect.scoped(
          Effect.map(ws.acquire({ repo, runId: "pruned", agentId: "agent", recycle: false }), (handle) => {
            assert.strictEqual(fs.readFileSync(path.join(handle.dir, "a.txt"), "utf8"), "a\n")
            assert.strictEqual(sh(handle.dir, "symbolic-ref", "HEAD"), "refs/heads/corral/pruned/agent")
            return handle.dir
          })
        ),
        admin
      )
      assert.strictEqual(prunedCount(bin), 2)
      assert.isFalse(fs.existsSync(dir))
      assert.deepStrictEqual(adminFolders(repo), [])
      assertAllRefsReadable(repo)
    }).pipe(Effect.provide(Workspace.layer))
  )

  it.live("an acquire whose every add loses its folder fails naming the worktree and the prune", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const bin = yield* pruningBin(1000)
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "pruned")
      const admin = path.join(repo, ".git", "worktrees", "agent")
      const acquired = yield* withPath(
        bin,
        Effect.exit(Effect.scoped(ws.acquire({ repo, runId: "pruned", agentId: "agent" }))),
        admin
      )
      assert.isTrue(Exit.isFailure(acquired), "the acquire succeeded although every add lost its folder")
      const message = Exit.isFailure(acquired) ? String(acquired.cause) : ""
      assert.include(message, path.join(repo, ".corral", "worktrees", "pruned", "agent"))
      assert.include(message, "worktree prune")
      assert.strictEqual(prunedCount(bin), 4, "the add ran once and was retried three times")
      assert.deepStrictEqual(adminFolders(repo), [])
      assertAllRefsReadable(repo)
      assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
    }).pipe(Effect.provide(Workspace.layer))
  )
})

/**
 * A folder holding a `git` for the PATH that runs the real git and, the first time a `worktree add`
 * fails, copies `$CORRAL_TEST_FIX_FROM` over `$CORRAL_TEST_FIX_TO` and leaves a mark `fixed`: another
 * process's `git worktree add` finishing its new worktree right after corral's command read it
 * half written.
 */
const finishingBin = Effect.acquireRelease(
  Effect.sync(() => {
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), "corral-finishing-add-bin-"))
    fs.writeFileSync(
      path.join(bin, "git"),
      `#!/bin/sh\n"${realGit}" "$@"\nstatus=$?\n` +
        `case " $* " in *" worktree add "*) ;; *) exit $status;; esac\n` +
        `if [ $status -ne 0 ] && [ ! -e "${bin}/fixed" ]; then cp "$CORRAL_TEST_FIX_FROM" "$CORRAL_TEST_FIX_TO"; : > "${bin}/fixed"; fi\n` +
        `exit $status\n`,
      { mode: 0o755 }
    )
    return bin
  }),
  (bin) => Effect.sync(() => fs.rmSync(bin, { recursive: true, force: true }))
)

describe("a git worktree add of another process, half done while corral adds a worktree", () => {
  it.live("the acquire adds its worktree once the other add has written the new worktree's commondir", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const other = path.join(path.dirname(repo), `${path.basename(repo)}-other`)
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(other, { recursive: true, force: true })))
      sh(repo, "worktree", "add", "--quiet", "--detach", other, "HEAD")
      const commondir = path.join(repo, ".git", "worktrees", path.basename(other), "commondir")
      const written = path.join(path.dirname(repo), `${path.basename(repo)}-commondir`)
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(written, { force: true })))
      fs.copyFileSync(commondir, written)
      fs.writeFileSync(commondir, "")
      const bin = yield* finishingBin
      const ws = yield* Workspace
      yield* ws.registerRun(repo, "beside")
      process.env.CORRAL_TEST_FIX_FROM = written
      process.env.CORRAL_TEST_FIX_TO = commondir
      const dir = yield* withPath(
        bin,
        Effect.scoped(
          Effect.map(ws.acquire({ repo, runId: "beside", agentId: "agent", recycle: false }), (handle) => {
            assert.strictEqual(fs.readFileSync(path.join(handle.dir, "a.txt"), "utf8"), "a\n")
            return handle.dir
          })
        )
      ).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            delete process.env.CORRAL_TEST_FIX_FROM
            delete process.env.CORRAL_TEST_FIX_TO
          })
        )
      )
      assert.isTrue(fs.existsSync(path.join(bin, "fixed")), "no git command met the half-written worktree")
      assert.isFalse(fs.existsSync(dir))
      assert.deepStrictEqual(adminFolders(repo), [path.basename(other)])
      assertAllRefsReadable(repo)
    }).pipe(Effect.provide(Workspace.layer), Effect.scoped)
  )
})
