import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Git from "../src/Git.ts"
import * as RemoteWorkspace from "../src/RemoteWorkspace.ts"
import { Workspace, type WorkspaceHandle } from "../src/Workspace.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-remote-")))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** The coordinator's repository and a runner's clone of it, side by side in a temp folder. */
const makeRepos = Effect.gen(function* () {
  const dir = yield* tempDir
  const origin = path.join(dir, "origin")
  fs.mkdirSync(origin)
  sh(origin, "init", "--quiet", "--initial-branch=main")
  fs.writeFileSync(path.join(origin, "shared.txt"), "one\ntwo\nthree\n")
  sh(origin, "add", ".")
  sh(origin, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
  const clone = path.join(dir, "clone")
  sh(dir, "clone", "--quiet", origin, clone)
  return { origin, clone }
})

const identity = { name: "Runner Test", email: "runner@test" }

const corralBranches = (repo: string) =>
  sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/")
    .split("\n")
    .filter((b) => b !== "")

const worktreeCount = (repo: string) => sh(repo, "worktree", "list", "--porcelain").split("\n\n").length

/** What a runner does: fetch the base, work in a disposable worktree, commit, push; the worktree goes at the end. */
const workOnRunner = (
  clone: string,
  remote: string,
  runId: string,
  agentId: string,
  base: string,
  work: (handle: WorkspaceHandle) => void
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const ws = yield* Workspace
      yield* RemoteWorkspace.fetchBase(clone, remote, runId, base)
      const handle = yield* ws.acquire({
        repo: clone,
        runId: `${runId}.runner`,
        agentId,
        base,
        disposable: true
      })
      work(handle)
      const committed = yield* RemoteWorkspace.commit(handle, {
        runId,
        message: `corral ${runId}: ${agentId}`,
        author: identity,
        committer: identity
      })
      if (committed.changed) yield* RemoteWorkspace.push(handle, remote, runId)
      return committed
    })
  )

/**
 * A state `git worktree add` leaves while it writes a new worktree's administrative folder: `HEAD`
 * holding the null object id until a child process sets it, or `commondir` created empty and filled
 * afterwards. Killed there (kill -9), git leaves the placeholder HEAD so.
 */
const halfAddedWorktree = (repo: string, dir: string, file: "HEAD" | "commondir" = "HEAD") => {
  sh(repo, "worktree", "add", "--quiet", "--detach", dir, "HEAD")
  const written = path.join(repo, ".git", "worktrees", path.basename(dir), file)
  const content = fs.readFileSync(written, "utf8")
  fs.writeFileSync(written, file === "HEAD" ? `${"0".repeat(40)}\n` : "")
  return { finish: () => fs.writeFileSync(written, content) }
}

/** A new commit on top of the coordinator's HEAD (same tree): a runner's clone lacks its objects. */
const newCommit = (origin: string, n: number) =>
  sh(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", "-p", "HEAD", "-m", `base ${n}`, "HEAD^{tree}")

/** A {@link newCommit}, published as the base of `runId`. */
const newBase = (origin: string, remote: string, runId: string, n: number) =>
  Effect.gen(function* () {
    const base = newCommit(origin, n)
    yield* RemoteWorkspace.publish(origin, remote, runId, base)
    return base
  })

/** Resolves once `condition` holds, checking every millisecond. */
const until = (condition: () => boolean): Effect.Effect<void> =>
  Effect.suspend(() => (condition() ? Effect.void : Effect.andThen(Effect.sleep("1 millis"), until(condition))))

describe("RemoteWorkspace", () => {
  it.live("work done in a runner's clone is fetched back, predicted and merged like a local workspace's", () =>
    Effect.gen(function* () {
      const { origin, clone } = yield* makeRepos
      const ws = yield* Workspace
      const remote = yield* RemoteWorkspace.defaultRemote(origin)
      assert.strictEqual(remote, path.join(origin, ".git", "corral", "remote.git"))
      const integration = yield* ws.integration({ repo: origin, runId: "r1" })
      const base = yield* integration.head()
      yield* RemoteWorkspace.publish(origin, remote, "r1", base)

      const edit = (line: string) => (handle: WorkspaceHandle) =>
        fs.writeFileSync(path.join(handle.dir, "shared.txt"), `${line}\ntwo\nthree\n`)
      const a = yield* workOnRunner(clone, remote, "r1", "a", base, edit("one by a"))
      const b = yield* workOnRunner(clone, remote, "r1", "b", base, edit("one by b"))
      assert.isTrue(a.changed && b.changed)
      assert.strictEqual(worktreeCount(clone), 1)
      assert.deepStrictEqual(corralBranches(clone), [])

      const workA = yield* RemoteWorkspace.fetchWork(origin, remote, {
        runId: "r1",
        agentId: "a",
        commit: a.commit,
        base
      })
      const workB = yield* RemoteWorkspace.fetchWork(origin, remote, {
        runId: "r1",
        agentId: "b",
        commit: b.commit,
        base
      })
      assert.deepStrictEqual(yield* integration.predictConflicts(workA, [workB]), [
        { agents: ["a", "b"], paths: ["shared.txt"] }
      ])
      const mergedA = yield* integration.merge(workA)
      assert.deepStrictEqual(mergedA, { _tag: "Merged", head: a.commit, fastForward: true })
      const message = sh(origin, "log", "-1", "--format=%an <%ae>%n%B", integration.branch)
      assert.include(message, "Runner Test <runner@test>")
      assert.include(message, "Corral-Run: r1\nCorral-Agent: a")
      const mergedB = yield* integration.merge(workB)
      assert.strictEqual(mergedB._tag, "Conflict")
      if (mergedB._tag === "Conflict") assert.deepStrictEqual(mergedB.paths, ["shared.txt"])

      yield* RemoteWorkspace.dropBranch(origin, workA)
      assert.deepStrictEqual(corralBranches(origin), ["corral/r1/b", "corral/r1/integration"])
      assert.notStrictEqual(sh(remote, "for-each-ref", "refs/heads/corral/r1/"), "")
      yield* RemoteWorkspace.clean(origin, remote, "r1")
      assert.strictEqual(sh(remote, "for-each-ref", "refs/heads/corral/r1/"), "")
      assert.strictEqual(sh(origin, "status", "--porcelain"), "")
    }).pipe(Effect.provide(Workspace.layer), Effect.scoped)
  )

  it.live("a base the remote does not hold, or an unreachable remote, fails naming the remote", () =>
    Effect.gen(function* () {
      const { origin, clone } = yield* makeRepos
      const remote = yield* RemoteWorkspace.defaultRemote(origin)
      const head = sh(origin, "rev-parse", "HEAD")
      yield* RemoteWorkspace.publish(origin, remote, "r2", head)
      const missing = yield* Effect.flip(RemoteWorkspace.fetchBase(clone, remote, "r2", "0".repeat(40)))
      assert.strictEqual(missing._tag, "RemoteError")
      assert.include(missing.message, `cannot fetch the base of run r2 from ${remote}`)
      const nowhere = path.join(path.dirname(origin), "nowhere.git")
      const unreachable = yield* Effect.flip(RemoteWorkspace.fetchBase(clone, nowhere, "r2", head))
      assert.include(unreachable.message, nowhere)
    }).pipe(Effect.scoped)
  )

  it.live.each(["HEAD", "commondir"] as const)(
    "the base is fetched while another process's `git worktree add` has not yet written the new worktree's %s",
    (file) =>
      Effect.gen(function* () {
        const { origin, clone } = yield* makeRepos
        const remote = yield* RemoteWorkspace.defaultRemote(origin)
        const base = yield* newBase(origin, remote, "r3", 1)
        const adding = halfAddedWorktree(clone, path.join(path.dirname(clone), "being-added"), file)
        const tally = Git.makeTally()
        const fetching = yield* RemoteWorkspace.fetchBase(clone, remote, "r3", base).pipe(
          Effect.provideService(Git.CurrentTally, tally),
          Effect.forkChild
        )
        yield* until(() => tally.millis > 0)
        adding.finish()
        yield* Fiber.join(fetching)
        assert.isAtLeast(tally.commands, 3)
        assert.strictEqual(sh(clone, "cat-file", "-t", base), "commit")
      }).pipe(Effect.scoped)
  )

  it.live("a worktree left half added (git killed in `worktree add`) fails the fetch naming its folder", () =>
    Effect.gen(function* () {
      const { origin, clone } = yield* makeRepos
      const remote = yield* RemoteWorkspace.defaultRemote(origin)
      const base = yield* newBase(origin, remote, "r4", 1)
      const stuck = path.join(path.dirname(clone), "stuck")
      halfAddedWorktree(clone, stuck)
      const error = yield* Effect.flip(RemoteWorkspace.fetchBase(clone, remote, "r4", base))
      assert.strictEqual(error._tag, "RemoteError")
      assert.include(error.message, `cannot fetch the base of run r4 from ${remote}`)
      assert.include(error.message, `the worktree ${stuck} has no commit in its HEAD`)
      assert.include(error.message, `git worktree remove --force --force ${stuck}`)
    }).pipe(Effect.scoped)
  )

  it.live("every fetch of a base succeeds while another process adds and removes worktrees in the repository", () =>
    Effect.gen(function* () {
      const { origin, clone } = yield* makeRepos
      const remote = yield* RemoteWorkspace.defaultRemote(origin)
      const bases = Array.from({ length: 30 }, (_, n) => newCommit(origin, n))
      sh(origin, "push", "--quiet", remote, ...bases.map((base, n) => `${base}:refs/heads/corral/r5-${n}/integration`))
      const scratch = path.dirname(clone)
      const stop = path.join(scratch, "stop")
      const adder = yield* Effect.acquireRelease(
        Effect.sync(() =>
          spawn(
            "bash",
            [
              "-c",
              'while [ ! -e "$1/stop" ]; do git worktree add -q --no-checkout --detach "$1/w" HEAD && echo >> "$1/added" && git worktree remove --force "$1/w"; done',
              "adder",
              scratch
            ],
            { cwd: clone, stdio: "ignore" }
          )
        ),
        (child) =>
          Effect.callback<void>((resume) => {
            child.once("exit", () => resume(Effect.void))
            fs.writeFileSync(stop, "")
          })
      )
      for (const [n, base] of bases.entries()) yield* RemoteWorkspace.fetchBase(clone, remote, `r5-${n}`, base)
      assert.isNull(adder.exitCode)
      assert.isAtLeast(fs.readFileSync(path.join(scratch, "added"), "utf8").length, 10)
    }).pipe(Effect.scoped)
  )

  it.live("a disposable workspace goes at release with its changes; gc removes a dead disposable run's leftovers", () =>
    Effect.gen(function* () {
      const { origin } = yield* makeRepos
      const ws = yield* Workspace
      yield* Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* ws.acquire({ repo: origin, runId: "d1", agentId: "a", disposable: true })
          fs.writeFileSync(path.join(handle.dir, "half-done.txt"), "work\n")
          sh(handle.dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "own")
        })
      )
      assert.strictEqual(worktreeCount(origin), 1)
      assert.deepStrictEqual(corralBranches(origin), [])

      // a runner killed mid-agent: its scope never closes and its run has no live lease
      const abandoned = yield* Scope.make()
      const handle = yield* ws
        .acquire({ repo: origin, runId: "d2", agentId: "a", disposable: true })
        .pipe(Scope.provide(abandoned))
      fs.writeFileSync(path.join(handle.dir, "half-done.txt"), "work\n")
      sh(handle.dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty", "-m", "own")
      const report = yield* ws.gc({ repo: origin })
      assert.deepStrictEqual(report.kept, [])
      assert.deepStrictEqual(
        report.removed.map((item) => item.kind),
        ["worktree", "branch"]
      )
      assert.strictEqual(worktreeCount(origin), 1)
      assert.deepStrictEqual(corralBranches(origin), [])
      yield* Scope.close(abandoned, Exit.void)
      assert.strictEqual(sh(origin, "status", "--porcelain"), "")
    }).pipe(Effect.provide(Workspace.layer), Effect.scoped)
  )
})
