import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { vi } from "vitest"
import { commitWork } from "../src/internal/workspaceIntegration.ts"
import * as LeaseTables from "../src/LeaseTables.ts"
import { type ReleaseReport, Workspace, type WorkspaceHandle } from "../src/Workspace.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const lines10 = (name: string) => `${Array.from({ length: 10 }, (_, i) => `${name} line ${i}`).join("\n")}\n`

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-ws-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    for (const name of ["a", "b", "c", "d", "e", "shared"])
      fs.writeFileSync(path.join(root, `${name}.txt`), lines10(name))
    fs.writeFileSync(path.join(root, "pnpm-lock.yaml"), "lockfileVersion: '9.0'\n")
    sh(root, "add", ".")
    sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    return root
  }),
  (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

/** Commits a `.gitignore` of `patterns` (one per line) to `repo`. */
const commitIgnore = (repo: string, patterns: string) => {
  fs.writeFileSync(path.join(repo, ".gitignore"), patterns)
  sh(repo, "add", ".gitignore")
  sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "ignore")
}

/** The release reports of a test's workspaces, in order, and the `onRelease` that collects them. */
const releases = () => {
  const reports: Array<ReleaseReport> = []
  return { reports, onRelease: (report: ReleaseReport) => Effect.sync(() => reports.push(report)) }
}

const userState = (repo: string) => ({
  status: sh(repo, "status", "--porcelain", "--untracked-files=all"),
  head: sh(repo, "rev-parse", "HEAD"),
  branch: sh(repo, "symbolic-ref", "HEAD")
})

const userIdentity = (repo: string) => {
  const get = (key: string) => {
    try {
      return sh(repo, "config", "--get", key)
    } catch {
      return ""
    }
  }
  const [name, email] = [get("user.name"), get("user.email")]
  return name === "" || email === "" ? "corral <corral@localhost>" : `${name} <${email}>`
}

const worktreeCount = (repo: string) => sh(repo, "worktree", "list", "--porcelain").split("\n\n").length

const edit = (handle: WorkspaceHandle, file: string, text: string) =>
  Effect.sync(() => fs.writeFileSync(path.join(handle.dir, file), text))

const replaceLine = (text: string, index: number, line: string) =>
  text
    .split("\n")
    .map((current, i) => (i === index ? line : current))
    .join("\n")

const provide = <A, E>(effect: Effect.Effect<A, E, Workspace | Scope.Scope>) =>
  effect.pipe(Effect.provide(Workspace.layer))

/** The defect `effect` dies with, if it dies. */
const defectOf = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.exit(effect), (exit) =>
    Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
  )

describe("Workspace", () => {
  it.live("duration settings it cannot use: the layer, or gc, dies with LeaseTables.InvalidOption naming them", () =>
    Effect.gen(function* () {
      const layers = [
        [
          { heartbeat: "soon" as never },
          'Workspace heartbeat: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [{ heartbeat: 0 }, "Workspace heartbeat: must be a positive, finite duration, got 0"],
        [
          { staleAfter: { seconds: true } as never },
          "Workspace staleAfter: duration field seconds must be a number, got boolean"
        ],
        [
          { staleAfter: { milliseconds: "5" } as never },
          "Workspace staleAfter: duration field milliseconds must be a number, got string"
        ]
      ] as const
      for (const [config, message] of layers) {
        const defect = yield* defectOf(Effect.scoped(Layer.build(Workspace.layerWith(config))))
        assert.instanceOf(defect, LeaseTables.InvalidOption, JSON.stringify(config))
        assert.strictEqual((defect as Error).message, message)
      }
      const repo = yield* makeRepo
      const ws = yield* Workspace
      for (const [olderThan, message] of [
        [{ days: "2" }, "Workspace.gc olderThan: duration field days must be a number, got string"],
        [-1, "Workspace.gc olderThan: must not be negative, got -1"]
      ] as const) {
        const defect = yield* defectOf(ws.gc({ repo, olderThan: olderThan as never }))
        assert.instanceOf(defect, LeaseTables.InvalidOption, JSON.stringify(olderThan))
        assert.strictEqual((defect as Error).message, message)
      }
    }).pipe(Effect.scoped, Effect.provide(Workspace.layer))
  )

  it.live("port settings it cannot use: the layer dies with LeaseTables.InvalidOption naming them", () =>
    Effect.gen(function* () {
      const cases = [
        [{ portBase: 0 }, "Workspace portBase: must be a whole number from 1 to 65535, got 0"],
        [{ portBase: 70000 }, "Workspace portBase: must be a whole number from 1 to 65535, got 70000"],
        [{ portBase: 20000.5 }, "Workspace portBase: must be a whole number from 1 to 65535, got 20000.5"],
        [{ portBase: "20000" as never }, 'Workspace portBase: must be a whole number from 1 to 65535, got "20000"'],
        [{ portsPerAgent: 0 }, "Workspace portsPerAgent: must be a whole number from 1 to 65535, got 0"],
        [{ portsPerAgent: Number.NaN }, "Workspace portsPerAgent: must be a whole number from 1 to 65535, got NaN"],
        [{ portBlocks: -1 }, "Workspace portBlocks: must be a whole number from 1 to 65535, got -1"],
        [{ portBlocks: 1.5 }, "Workspace portBlocks: must be a whole number from 1 to 65535, got 1.5"],
        [
          { portBase: 60000 },
          "Workspace portBlocks: 1000 blocks of 10 ports from port 60000 end at port 69999, above 65535"
        ],
        [
          { portBase: 65535, portsPerAgent: 2, portBlocks: 1 },
          "Workspace portBlocks: 1 blocks of 2 ports from port 65535 end at port 65536, above 65535"
        ]
      ] as const
      for (const [config, message] of cases) {
        const defect = yield* defectOf(Effect.scoped(Layer.build(Workspace.layerWith(config))))
        assert.instanceOf(defect, LeaseTables.InvalidOption, JSON.stringify(config))
        assert.strictEqual((defect as Error).message, message)
      }
      const last = Workspace.layerWith({ portBase: 65535, portsPerAgent: 1, portBlocks: 1 })
      assert.isUndefined(yield* defectOf(Effect.scoped(Layer.build(last))), "one block of one port at 65535 fits")
    })
  )

  it.live("five concurrent agents merge into the integration branch and leave nothing behind", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const before = userState(repo)
        const ws = yield* Workspace
        const integration = yield* ws.integration({ repo, runId: "r5" })
        const agent = (name: string) =>
          Effect.scoped(
            Effect.gen(function* () {
              const handle = yield* ws.acquire({ repo, runId: "r5", agentId: name, base: yield* integration.head() })
              yield* edit(handle, `${name}.txt`, `${name} rewritten by agent\n`)
              const commit = yield* integration.commitAll(handle, `agent ${name} edit`)
              assert.isTrue(commit.changed)
              return yield* integration.merge(handle)
            })
          )
        const results = yield* Effect.all(["a", "b", "c", "d", "e"].map(agent), { concurrency: "unbounded" })
        assert.deepStrictEqual(
          results.map((r) => r._tag),
          ["Merged", "Merged", "Merged", "Merged", "Merged"]
        )
        const head = yield* integration.head()
        for (const name of ["a", "b", "c", "d", "e"]) {
          assert.strictEqual(sh(repo, "show", `${head}:${name}.txt`), `${name} rewritten by agent`)
        }
        assert.strictEqual(worktreeCount(repo), 1)
        assert.deepStrictEqual(sh(repo, "branch", "--list", "corral/r5/*").trim(), "corral/r5/integration")
        assert.deepStrictEqual(userState(repo), before)
        assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "r5")))
        const log = sh(repo, "log", "-1", "--format=%an <%ae>", head)
        assert.strictEqual(log, userIdentity(repo))
      })
    )
  )

  it.live("dropIfEmpty deletes an integration branch only while it is at its base", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const empty = yield* ws.integration({ repo, runId: "drop" })
        assert.isTrue(yield* empty.dropIfEmpty())
        assert.strictEqual(sh(repo, "branch", "--list", "corral/drop/*"), "")
        const moved = yield* ws.integration({ repo, runId: "moved" })
        sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "--allow-empty", "-m", "x")
        sh(repo, "branch", "--force", "corral/moved/integration", "HEAD")
        assert.isFalse(yield* moved.dropIfEmpty(), "moved by another process: kept")
        assert.strictEqual(sh(repo, "branch", "--list", "corral/moved/integration"), "corral/moved/integration")
        const merged = yield* ws.integration({ repo, runId: "merged" })
        yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* ws.acquire({ repo, runId: "merged", agentId: "a", base: yield* merged.head() })
            yield* edit(handle, "a.txt", "a rewritten\n")
            yield* merged.commitAll(handle, "edit a")
            assert.strictEqual((yield* merged.merge(handle))._tag, "Merged")
          })
        )
        assert.isFalse(yield* merged.dropIfEmpty(), "merged work: kept")
        assert.strictEqual(sh(repo, "branch", "--list", "corral/merged/integration"), "corral/merged/integration")
        const lost = yield* ws.integration({ repo, runId: "lost" })
        const base = yield* lost.head()
        sh(repo, "branch", "--force", "corral/lost/integration", "HEAD~1")
        yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* ws.acquire({ repo, runId: "lost", agentId: "a", base })
            yield* edit(handle, "a.txt", "a again\n")
            yield* lost.commitAll(handle, "edit a")
            const failed = yield* Effect.flip(lost.merge(handle))
            assert.strictEqual(failed._tag, "IntegrationMoved")
          })
        )
        assert.isFalse(yield* lost.dropIfEmpty(), "a head corral no longer knows, moved away: kept")
        sh(repo, "branch", "--force", "corral/lost/integration", base)
        assert.isTrue(yield* lost.dropIfEmpty(), "a head corral no longer knows, back at the base: deleted")
        assert.strictEqual(sh(repo, "branch", "--list", "corral/lost/integration"), "")
      })
    )
  )

  it.live("a second agent editing the same lines gets a conflict and keeps its branch", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const before = userState(repo)
        const ws = yield* Workspace
        const integration = yield* ws.integration({ repo, runId: "rc" })
        const base = yield* integration.head()
        const original = fs.readFileSync(path.join(repo, "shared.txt"), "utf8")
        const scope = yield* Scope.make()
        const [one, two] = yield* Effect.all(
          ["one", "two"].map((agentId) => ws.acquire({ repo, runId: "rc", agentId, base })),
          { concurrency: "unbounded" }
        ).pipe(Scope.provide(scope))
        yield* edit(one!, "shared.txt", replaceLine(original, 3, "changed by one"))
        yield* edit(two!, "shared.txt", replaceLine(original, 3, "changed by two"))
        const predicted = yield* integration.predictConflicts(one!, [two!])
        assert.deepStrictEqual(predicted, [{ agents: ["one", "two"], paths: ["shared.txt"] }])
        assert.strictEqual(sh(one!.dir, "status", "--porcelain"), "M shared.txt")
        yield* integration.commitAll(one!, "one edits shared")
        yield* integration.commitAll(two!, "two edits shared")
        const first = yield* integration.merge(one!)
        assert.strictEqual(first._tag, "Merged")
        const headAfterFirst = yield* integration.head()
        const second = yield* integration.merge(two!)
        assert.strictEqual(second._tag, "Conflict")
        if (second._tag === "Conflict") assert.deepStrictEqual(second.paths, ["shared.txt"])
        assert.strictEqual(yield* integration.head(), headAfterFirst)
        yield* Scope.close(scope, Exit.void)
        assert.match(sh(repo, "branch", "--list", "corral/rc/two"), /corral\/rc\/two/)
        assert.strictEqual(sh(repo, "branch", "--list", "corral/rc/one"), "")
        assert.deepStrictEqual(userState(repo), before)
      })
    )
  )

  it.live("an agent acquired after another merged starts from the integration head", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const integration = yield* ws.integration({ repo, runId: "rs" })
        const original = fs.readFileSync(path.join(repo, "shared.txt"), "utf8")
        const step = (agentId: string, line: string) =>
          Effect.scoped(
            Effect.gen(function* () {
              const handle = yield* ws.acquire({ repo, runId: "rs", agentId, base: yield* integration.head() })
              const current = fs.readFileSync(path.join(handle.dir, "shared.txt"), "utf8")
              yield* edit(handle, "shared.txt", replaceLine(current, 3, line))
              yield* integration.commitAll(handle, `${agentId} edits`)
              return { seen: current, result: yield* integration.merge(handle) }
            })
          )
        yield* step("first", "first was here")
        const second = yield* step("second", "second was here")
        assert.include(second.seen, "first was here")
        assert.strictEqual(second.result._tag, "Merged")
        const head = yield* integration.head()
        assert.include(sh(repo, "show", `${head}:shared.txt`), "second was here")
        assert.notInclude(fs.readFileSync(path.join(repo, "shared.txt"), "utf8"), "was here")
        assert.notStrictEqual(original, "")
      })
    )
  )

  it.live(
    "a worktree of a subfolder's repository is released from where it was made: the report names it, no run folder is left",
    () =>
      provide(
        Effect.gen(function* () {
          const repo = yield* makeRepo
          const sub = path.join(repo, "sub")
          fs.mkdirSync(sub)
          const ws = yield* Workspace
          const { reports, onRelease } = releases()
          const dir = yield* Effect.scoped(
            Effect.map(ws.acquire({ repo: sub, runId: "rs", agentId: "one", onRelease }), (handle) => handle.dir)
          )
          assert.strictEqual(dir, path.join(repo, ".corral", "worktrees", "rs", "one"))
          assert.strictEqual(reports[0]?.dir, dir)
          assert.strictEqual(reports[0]?.workspace, "removed")
          assert.deepStrictEqual(fs.readdirSync(path.join(repo, ".corral", "worktrees")), [])
        })
      )
  )

  it.live("release removes a clean failed workspace and keeps an interrupted dirty one", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        const failing = Effect.scoped(
          Effect.gen(function* () {
            yield* ws.acquire({ repo, runId: "rf", agentId: "clean", onRelease })
            return yield* Effect.fail("agent crashed")
          })
        )
        assert.isTrue(Exit.isFailure(yield* Effect.exit(failing)))
        assert.deepStrictEqual(reports[0], {
          agentId: "clean",
          dir: path.join(repo, ".corral", "worktrees", "rf", "clean"),
          workspace: "removed",
          branch: "deleted",
          reasons: []
        })
        const written = yield* Deferred.make<WorkspaceHandle>()
        const fiber = yield* Effect.forkChild(
          Effect.scoped(
            Effect.gen(function* () {
              const handle = yield* ws.acquire({ repo, runId: "rf", agentId: "dirty", onRelease })
              yield* edit(handle, "a.txt", "half-done work\n")
              yield* Deferred.succeed(written, handle)
              yield* Effect.never
            })
          )
        )
        const handle = yield* Deferred.await(written)
        yield* Fiber.interrupt(fiber)
        assert.strictEqual(reports[1]?.workspace, "kept")
        assert.deepStrictEqual(reports[1]?.reasons, ["the worktree has uncommitted changes"])
        assert.strictEqual(fs.readFileSync(path.join(handle.dir, "a.txt"), "utf8"), "half-done work\n")
        assert.match(sh(repo, "branch", "--list", "corral/rf/dirty"), /dirty/)
        assert.strictEqual(sh(repo, "branch", "--list", "corral/rf/clean"), "")
        assert.strictEqual(worktreeCount(repo), 2)
      })
    )
  )

  it.live("agents cannot see each other's uncommitted files and get private ports and folders", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        fs.writeFileSync(path.join(repo, ".env"), "SECRET=1\n")
        fs.writeFileSync(path.join(repo, "a.txt"), "user edit in progress\n")
        const before = userState(repo)
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        const scope = yield* Scope.make()
        const copyFiles = [".env", "missing.env", "b.txt"]
        const handles = yield* Effect.all(
          ["p", "q", "r"].map((agentId) => ws.acquire({ repo, runId: "rv", agentId, copyFiles, onRelease })),
          { concurrency: "unbounded" }
        ).pipe(Scope.provide(scope))
        const [p, q] = handles
        yield* edit(p!, "secret.txt", "only p\n")
        assert.isFalse(fs.existsSync(path.join(q!.dir, "secret.txt")))
        assert.strictEqual(fs.readFileSync(path.join(q!.dir, ".env"), "utf8"), "SECRET=1\n")
        assert.strictEqual(fs.readFileSync(path.join(q!.dir, "a.txt"), "utf8"), lines10("a"))
        assert.isTrue(p!.warnings.some((w) => w.includes("uncommitted changes")))
        assert.isTrue(p!.warnings.some((w) => w.includes("missing.env")))
        const blocks = handles.map((h) => h.ports.first).sort()
        assert.strictEqual(new Set(blocks).size, 3)
        for (let i = 1; i < blocks.length; i++) assert.isAtLeast(blocks[i]! - blocks[i - 1]!, handles[0]!.ports.count)
        for (const key of ["TMPDIR", "CORRAL_AGENT_DIR", "XDG_CACHE_HOME", "CARGO_TARGET_DIR", "CORRAL_NAMESPACE"]) {
          assert.strictEqual(new Set(handles.map((h) => h.env[key])).size, 3, key)
        }
        assert.strictEqual(p!.env.PORT, String(p!.ports.first))
        assert.isTrue(fs.statSync(p!.env.TMPDIR!).isDirectory())
        assert.isTrue(p!.warnings.some((w) => w.includes("b.txt is tracked")))
        assert.deepStrictEqual(q!.copiedFiles, [".env"])
        const integration = yield* ws.integration({ repo, runId: "rv" })
        yield* edit(q!, "c.txt", "q edit\n")
        yield* integration.commitAll(q!, "q commits")
        assert.strictEqual(sh(q!.dir, "show", "--name-only", "--format=", "HEAD"), "c.txt")
        assert.strictEqual((yield* integration.merge(q!))._tag, "Merged")
        yield* Scope.close(scope, Exit.void)
        const outcome = Object.fromEntries(reports.map((r) => [r.agentId, r.workspace]))
        assert.deepStrictEqual(outcome, { p: "kept", q: "removed", r: "removed" })
        assert.isTrue(fs.existsSync(path.join(p!.dir, "secret.txt")))
        assert.isFalse(fs.existsSync(p!.env.TMPDIR!))
        assert.isTrue(fs.existsSync(p!.env.CORRAL_AGENT_DIR!))
        assert.isFalse(fs.existsSync(q!.env.CORRAL_AGENT_DIR!))
        assert.deepStrictEqual(userState(repo), before)
      })
    )
  )

  it.live("namespaces are deterministic and port blocks are reused after release", () =>
    // Blocks are held machine-wide: a base of this process's own keeps other corral processes out.
    Effect.provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const once = (runId: string, agentId: string) =>
          Effect.scoped(
            ws
              .acquire({ repo, runId, agentId, strategy: "none" })
              .pipe(Effect.map((h) => ({ namespace: h.namespace, port: h.ports.first, dir: h.dir })))
          )
        const first = yield* once("n1", "agent")
        const second = yield* once("n2", "agent")
        const other = yield* once("n3", "other")
        assert.strictEqual(first.namespace, second.namespace)
        assert.notStrictEqual(first.namespace, other.namespace)
        assert.strictEqual(first.port, second.port)
        assert.strictEqual(first.dir, repo)
        assert.match(first.namespace, /^[0-9a-f]{16}$/)
      }),
      Workspace.layerWith({ portBase: 30000 + (process.pid % 2000) * 10, portBlocks: 10 })
    )
  )

  it.live("two Workspace services, as two corral processes, never hand out the same port block at once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const one = yield* Layer.build(Workspace.layer)
        const two = yield* Layer.build(Workspace.layer)
        const held = (runId: string) =>
          Effect.flatMap(Workspace, (ws) => ws.acquire({ repo, runId, agentId: "server", strategy: "none" }))
        const first = yield* held("pa").pipe(Effect.provideContext(one))
        const second = yield* held("pb").pipe(Effect.provideContext(two))
        assert.notStrictEqual(first.ports.first, second.ports.first)
        assert.strictEqual(first.env.PORT, String(first.ports.first))
        assert.strictEqual(second.env.PORT, String(second.ports.first))
      })
    )
  )

  it.live("a port block that cannot be held machine-wide is still handed out, with one warning naming it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const listen = net.Server.prototype.listen
        const refused = vi.spyOn(net.Server.prototype, "listen").mockImplementation(function (
          this: net.Server,
          ...args: Array<any>
        ) {
          if (typeof args[0] !== "string" || !args[0].startsWith("\0corral-ports-"))
            return Reflect.apply(listen, this, args)
          const error = Object.assign(new Error("listen EACCES"), { code: "EACCES" })
          process.nextTick(() => this.emit("error", error))
          return this
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => refused.mockRestore()))
        const base = 40000 + (process.pid % 2000) * 10
        const ws = yield* Layer.build(Workspace.layerWith({ portBase: base, portBlocks: 3 }))
        const acquire = (agentId: string) =>
          Effect.flatMap(Workspace, (w) => w.acquire({ repo, runId: "pf", agentId, strategy: "none" })).pipe(
            Effect.provideContext(ws)
          )
        const first = yield* acquire("one")
        const second = yield* acquire("two")
        assert.deepStrictEqual([first.ports.first, second.ports.first, first.env.PORT], [base, base + 10, String(base)])
        assert.deepStrictEqual(first.warnings, [
          `port block ${base}-${base + 9} is private to this corral process only, not machine-wide: cannot make the abstract socket @corral-ports-${base} (EACCES); another corral process on this machine may give its agents the same ports`
        ])
        assert.deepStrictEqual(second.warnings, [])
        assert.deepStrictEqual(Object.keys(first.ports).sort(), ["count", "first"])
        refused.mockRestore()
        const held = yield* acquire("three")
        assert.deepStrictEqual([held.ports.first, held.warnings], [base + 20, []])
      })
    )
  )

  it.live("the directory strategy copies the folder and keeps a changed copy", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        const dir = yield* Effect.scoped(
          ws.acquire({ repo, runId: "rd", agentId: "copy", strategy: "directory", onRelease }).pipe(
            Effect.tap((h) =>
              Effect.sync(() => assert.strictEqual(fs.readFileSync(path.join(h.dir, "b.txt"), "utf8"), lines10("b")))
            ),
            Effect.map((h) => h.dir)
          )
        )
        assert.isFalse(fs.existsSync(dir))
        yield* Effect.scoped(
          ws
            .acquire({ repo, runId: "rd", agentId: "copy2", strategy: "directory", onRelease })
            .pipe(Effect.tap((h) => edit(h, "new.txt", "new\n")))
        )
        assert.deepStrictEqual(
          reports.map((r) => r.workspace),
          ["removed", "kept"]
        )
      })
    )
  )

  it.live("sparse workspaces check out only the listed folders", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        fs.mkdirSync(path.join(repo, "pkg", "one"), { recursive: true })
        fs.mkdirSync(path.join(repo, "pkg", "two"), { recursive: true })
        fs.writeFileSync(path.join(repo, "pkg", "one", "x.ts"), "one\n")
        fs.writeFileSync(path.join(repo, "pkg", "two", "y.ts"), "two\n")
        sh(repo, "add", ".")
        sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "packages")
        const ws = yield* Workspace
        const handle = yield* ws.acquire({ repo, runId: "sp", agentId: "narrow", sparse: ["pkg/one"] })
        assert.isTrue(fs.existsSync(path.join(handle.dir, "pkg", "one", "x.ts")))
        assert.isFalse(fs.existsSync(path.join(handle.dir, "pkg", "two", "y.ts")))
        assert.isTrue(fs.existsSync(path.join(handle.dir, "a.txt")))
        assert.strictEqual(sh(handle.dir, "status", "--porcelain"), "")
      })
    )
  )

  it.live("many agents starting and stopping at once do not trip over git locks", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const ids = Array.from({ length: 16 }, (_, i) => `w${i}`)
        yield* Effect.forEach(ids, (agentId) => Effect.scoped(ws.acquire({ repo, runId: "many", agentId })), {
          concurrency: "unbounded"
        })
        assert.strictEqual(worktreeCount(repo), 1)
        assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
      })
    )
  )

  it.live("errors name the repository, branch and agent", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const plain = fs.mkdtempSync(path.join(os.tmpdir(), "corral-plain-"))
        const notRepo = yield* Effect.flip(Effect.scoped(ws.acquire({ repo: plain, runId: "re", agentId: "x" })))
        fs.rmSync(plain, { recursive: true })
        assert.strictEqual(notRepo._tag, "NotAGitRepository")
        assert.include(notRepo.message, plain)
        sh(repo, "branch", "corral/re/taken")
        const taken = yield* Effect.flip(Effect.scoped(ws.acquire({ repo, runId: "re", agentId: "taken" })))
        assert.strictEqual(taken._tag, "BranchAlreadyExists")
        assert.include(taken.message, "corral/re/taken")
        assert.include(taken.message, repo)
        yield* ws.gc({ repo })
        assert.strictEqual(sh(repo, "branch", "--list", "corral/re/taken"), "corral/re/taken")
        const invalid = yield* Effect.flip(Effect.scoped(ws.acquire({ repo, runId: "re", agentId: "../evil" })))
        assert.strictEqual(invalid._tag, "InvalidWorkspaceId")
        const badFolder = yield* Effect.flip(
          Effect.scoped(ws.acquire({ repo, runId: "re", agentId: "fine", folder: "../evil" }))
        )
        assert.strictEqual(badFolder._tag, "InvalidWorkspaceId")
        assert.include(badFolder.message, 'invalid folder "../evil"')
        const none = yield* Effect.scoped(ws.acquire({ repo, runId: "re", agentId: "shared", strategy: "none" }))
        const integration = yield* ws.integration({ repo, runId: "re" })
        const unsupported = yield* Effect.flip(integration.commitAll(none, "nope"))
        assert.strictEqual(unsupported._tag, "UnsupportedStrategy")
      })
    )
  )

  it.live("a set-up that fails is rolled back, and the report names the workspace, never the user's checkout", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        fs.mkdirSync(path.join(repo, "pkg"))
        fs.writeFileSync(path.join(repo, "pkg", "x.txt"), "x\n")
        sh(repo, "add", ".")
        sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "pkg")
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        for (const folder of ["pkg/*", "../pkg", "pkg/[ab]", "/", "pkg\nother"]) {
          const failed = yield* Effect.scoped(
            ws.acquire({ repo, runId: "rb", agentId: "bad-sparse", sparse: ["pkg", folder], onRelease })
          ).pipe(Effect.flip)
          assert.strictEqual(failed._tag, "InvalidSparseFolder", folder)
          assert.include(failed.message, "agent bad-sparse")
          assert.include(failed.message, JSON.stringify(folder))
        }
        assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "rb", "bad-sparse")))
        execFileSync("mkfifo", [path.join(repo, "fifo")])
        const copyFailed = yield* Effect.scoped(
          ws.acquire({ repo, runId: "rb", agentId: "bad-copy", sparse: ["pkg"], copyFiles: ["fifo"], onRelease })
        ).pipe(Effect.flip)
        assert.strictEqual(copyFailed._tag, "WorkspaceIoError")
        fs.rmSync(path.join(repo, "fifo"))
        assert.deepStrictEqual(
          reports.map((r) => [r.agentId, path.relative(repo, r.dir), r.workspace, r.branch]),
          [["bad-copy", ".corral/worktrees/rb/bad-copy", "removed", "deleted"]]
        )
        assert.strictEqual(worktreeCount(repo), 1)
        assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
        assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "rb")))
      })
    )
  )

  it.live("closing a run's pool removes its free worktrees at once; later releases remove rather than pool", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        const corralBranches = () => sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/")
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* ws.registerRun(repo, "close")
            const integration = yield* ws.integration({ repo, runId: "close" })
            const acquire = (agentId: string, base: string) =>
              ws.acquire({ repo, runId: "close", agentId, base, recycle: true, onRelease })
            const base = yield* integration.head()
            yield* Effect.forEach(
              ["a", "b"],
              (agentId) =>
                Effect.scoped(
                  Effect.gen(function* () {
                    const handle = yield* acquire(agentId, base)
                    yield* edit(handle, `${agentId}.txt`, `${agentId} was here\n`)
                    yield* integration.commitAll(handle, agentId)
                    assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
                  })
                ),
              { concurrency: 2, discard: true }
            )
            assert.strictEqual(worktreeCount(repo), 3, "both worktrees are in the pool")
            yield* ws.closePool("close")
            assert.strictEqual(worktreeCount(repo), 1)
            assert.deepStrictEqual(fs.readdirSync(path.join(repo, ".corral", "worktrees")), [])
            assert.strictEqual(corralBranches(), "corral/close/integration")
            yield* Effect.scoped(
              Effect.gen(function* () {
                const late = yield* acquire("late", yield* integration.head())
                assert.strictEqual(fs.readFileSync(path.join(late.dir, "a.txt"), "utf8"), "a was here\n")
                yield* edit(late, "c.txt", "late was here\n")
                yield* ws.recycleAfter(late, integration.commitAll(late, "late"))
                assert.strictEqual((yield* integration.merge(late))._tag, "Merged")
              })
            )
            assert.strictEqual(worktreeCount(repo), 1, "the late agent's worktree was removed, not pooled")
          })
        )
        assert.deepStrictEqual(reports.map((r) => [r.agentId, r.workspace, r.branch]).sort(), [
          ["a", "recycled", "deleted"],
          ["b", "recycled", "deleted"],
          ["late", "removed", "deleted"]
        ])
        assert.strictEqual(corralBranches(), "corral/close/integration")
        assert.strictEqual(sh(repo, "show", "corral/close/integration:c.txt"), "late was here")
      })
    )
  )

  it.live("a reuse of a pooled worktree interrupted before the worktree moved removes it", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const { onRelease } = releases()
        const bin = fs.mkdtempSync(path.join(os.tmpdir(), "corral-pool-intr-"))
        const fifo = path.join(bin, "reached")
        execFileSync("mkfifo", [fifo])
        const realGit = execFileSync("sh", ["-c", "command -v git"]).toString().trim()
        // The reuse's first git command (is the agent's branch free?) says so on the fifo, then hangs.
        fs.writeFileSync(
          path.join(bin, "git"),
          `#!/bin/sh\ncase "$*" in *refs/heads/corral/intr/b*) echo > "${fifo}"; exec sleep 30;; esac\nexec "${realGit}" "$@"\n`,
          { mode: 0o755 }
        )
        const pathBefore = process.env.PATH
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* ws.registerRun(repo, "intr")
            const integration = yield* ws.integration({ repo, runId: "intr" })
            const acquire = (agentId: string, base: string) =>
              ws.acquire({ repo, runId: "intr", agentId, base, recycle: true, onRelease })
            yield* Effect.scoped(
              Effect.gen(function* () {
                const handle = yield* acquire("a", yield* integration.head())
                yield* edit(handle, "a.txt", "a was here\n")
                yield* integration.commitAll(handle, "a")
                assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
              })
            )
            assert.strictEqual(worktreeCount(repo), 2, "a's worktree is in the pool")
            const base = yield* integration.head()
            process.env.PATH = `${bin}${path.delimiter}${pathBefore}`
            const reusing = yield* Effect.forkChild(Effect.scoped(acquire("b", base)))
            yield* Effect.promise(() => fs.promises.readFile(fifo))
            yield* Fiber.interrupt(reusing)
            process.env.PATH = pathBefore
            yield* ws.closePool("intr")
            assert.strictEqual(worktreeCount(repo), 1, "the worktree taken from the pool was removed")
            assert.deepStrictEqual(fs.readdirSync(path.join(repo, ".corral", "worktrees")), [], "no run folder is left")
          })
        ).pipe(
          Effect.ensuring(
            Effect.sync(() => {
              process.env.PATH = pathBefore
              fs.rmSync(bin, { recursive: true, force: true })
            })
          )
        )
      })
    )
  )

  it.live("a recycled worktree never shows the next agent a previous agent's tracked, untracked or ignored files", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        commitIgnore(repo, "build/\n*.log\n")
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* ws.registerRun(repo, "pool")
            const integration = yield* ws.integration({ repo, runId: "pool" })
            const acquire = (agentId: string, base: string) =>
              ws.acquire({ repo, runId: "pool", agentId, base, recycle: true, onRelease })
            const firstDir = yield* Effect.scoped(
              Effect.gen(function* () {
                const first = yield* acquire("first", yield* integration.head())
                fs.writeFileSync(path.join(first.dir, "a.txt"), "first was here\n")
                fs.mkdirSync(path.join(first.dir, "build", "deep"), { recursive: true })
                fs.writeFileSync(path.join(first.dir, "build", "deep", "secret.bin"), "first's build output")
                fs.writeFileSync(path.join(first.dir, "debug.log"), "first's log")
                fs.mkdirSync(path.join(first.dir, "nested"))
                sh(path.join(first.dir, "nested"), "init", "--quiet")
                fs.writeFileSync(path.join(first.dir, "nested", "inner.txt"), "a nested repository")
                fs.writeFileSync(path.join(first.dir, ".gitignore"), "build/\n*.log\nnested/\n")
                yield* integration.commitAll(first, "first edits")
                assert.strictEqual((yield* integration.merge(first))._tag, "Merged")
                return first.dir
              })
            )
            assert.deepStrictEqual(
              reports.map((r) => [r.agentId, r.workspace, r.branch]),
              [["first", "recycled", "deleted"]]
            )
            const base = yield* integration.head()
            const second = yield* acquire("second", base)
            assert.notStrictEqual(second.dir, firstDir)
            assert.isFalse(fs.existsSync(firstDir))
            assert.strictEqual(sh(second.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
            assert.strictEqual(sh(second.dir, "rev-parse", "HEAD"), base)
            assert.strictEqual(sh(second.dir, "symbolic-ref", "HEAD"), "refs/heads/corral/pool/second")
            for (const gone of ["build", "debug.log", "nested"])
              assert.isFalse(fs.existsSync(path.join(second.dir, gone)))
            assert.strictEqual(fs.readFileSync(path.join(second.dir, "a.txt"), "utf8"), "first was here\n")
            fs.writeFileSync(path.join(second.dir, "untracked.txt"), "never committed")
          })
        )
        assert.deepStrictEqual(
          reports.map((r) => [r.agentId, r.workspace]),
          [
            ["first", "recycled"],
            ["second", "kept"]
          ]
        )
        assert.strictEqual(worktreeCount(repo), 2)
        assert.deepStrictEqual(fs.readdirSync(path.join(repo, ".corral", "worktrees", "pool")), ["second"])
      })
    )
  )

  it.live(
    "a recycled sparse worktree holds exactly the next agent's cone at its base, and a full agent gets every file back",
    () =>
      provide(
        Effect.gen(function* () {
          const repo = yield* makeRepo
          commitIgnore(repo, "build/\n*.log\n")
          for (const pkg of ["one", "two", "three"]) {
            fs.mkdirSync(path.join(repo, "pkg", pkg, "deep"), { recursive: true })
            fs.writeFileSync(path.join(repo, "pkg", pkg, "x.ts"), `${pkg}\n`)
            fs.writeFileSync(path.join(repo, "pkg", pkg, "deep", "y.ts"), `${pkg} deep\n`)
          }
          sh(repo, "add", ".")
          sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "packages")
          const files = (dir: string): Array<string> =>
            fs
              .readdirSync(dir, { recursive: true, withFileTypes: true })
              .filter((entry) => entry.isFile() && entry.name !== ".git")
              .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
              .sort()
          /** The files cone mode checks out: top-level ones, those under a folder, those directly in a parent of one. */
          const tracked = (commit: string, cone: ReadonlyArray<string> | undefined) =>
            sh(repo, "ls-tree", "-r", "--name-only", commit)
              .split("\n")
              .filter(
                (file) =>
                  cone === undefined ||
                  !file.includes("/") ||
                  cone.some(
                    (folder) => file.startsWith(`${folder}/`) || `${folder}/`.startsWith(`${path.posix.dirname(file)}/`)
                  )
              )
              .sort()
          const ws = yield* Workspace
          const { reports, onRelease } = releases()
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* ws.registerRun(repo, "sparse-pool")
              const integration = yield* ws.integration({ repo, runId: "sparse-pool" })
              const acquire = (agentId: string, base: string, sparse: ReadonlyArray<string> | undefined) =>
                ws.acquire({ repo, runId: "sparse-pool", agentId, base, sparse, recycle: true, onRelease })
              const agent = (agentId: string, sparse: ReadonlyArray<string>, work: (dir: string) => void) =>
                Effect.scoped(
                  Effect.gen(function* () {
                    const base = yield* integration.head()
                    const handle = yield* acquire(agentId, base, sparse)
                    assert.deepStrictEqual(files(handle.dir), tracked(base, sparse), agentId)
                    assert.strictEqual(
                      sh(handle.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"),
                      ""
                    )
                    assert.strictEqual(sh(handle.dir, "sparse-checkout", "list"), [...sparse].sort().join("\n"))
                    assert.strictEqual(sh(handle.dir, "rev-parse", "HEAD"), base)
                    work(handle.dir)
                    yield* ws.recycleAfter(handle, integration.commitAll(handle, `${agentId} edits`))
                    assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
                  })
                )
              yield* agent("first", ["pkg/one"], (dir) => {
                fs.writeFileSync(path.join(dir, "pkg", "one", "x.ts"), "first was here\n")
                fs.writeFileSync(path.join(dir, "pkg", "one", "deep", "new.ts"), "first's new file\n")
                fs.mkdirSync(path.join(dir, "pkg", "one", "build"))
                fs.writeFileSync(path.join(dir, "pkg", "one", "build", "secret.bin"), "first's build output")
                fs.writeFileSync(path.join(dir, "pkg", "one", "debug.log"), "first's log")
                fs.writeFileSync(path.join(dir, "top.log"), "first's top-level log")
              })
              yield* agent("second", ["pkg/two/deep", "pkg/three"], (dir) => {
                fs.writeFileSync(path.join(dir, "pkg", "two", "deep", "y.ts"), "second was here\n")
                fs.writeFileSync(path.join(dir, "pkg", "three", "debug.log"), "second's log")
              })
              const base = yield* integration.head()
              yield* Effect.scoped(
                Effect.gen(function* () {
                  const full = yield* acquire("full", base, undefined)
                  assert.deepStrictEqual(files(full.dir), tracked(base, undefined))
                  assert.strictEqual(sh(full.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
                  assert.strictEqual(
                    sh(full.dir, "config", "--get", "--default", "false", "core.sparseCheckout"),
                    "false"
                  )
                  assert.strictEqual(
                    fs.readFileSync(path.join(full.dir, "pkg", "one", "x.ts"), "utf8"),
                    "first was here\n"
                  )
                  assert.strictEqual(
                    fs.readFileSync(path.join(full.dir, "pkg", "two", "deep", "y.ts"), "utf8"),
                    "second was here\n"
                  )
                  assert.strictEqual(fs.readFileSync(path.join(full.dir, "pkg", "three", "x.ts"), "utf8"), "three\n")
                  assert.strictEqual(worktreeCount(repo), 2)
                })
              )
              yield* agent("fourth", ["pkg/one/deep"], (dir) => {
                assert.isFalse(fs.existsSync(path.join(dir, "pkg", "two")))
                assert.strictEqual(worktreeCount(repo), 2)
                fs.writeFileSync(path.join(dir, "pkg", "one", "deep", "z.ts"), "fourth\n")
              })
            })
          )
          assert.deepStrictEqual(
            reports.map((r) => [r.agentId, r.workspace, r.branch]),
            [
              ["first", "recycled", "deleted"],
              ["second", "recycled", "deleted"],
              ["full", "recycled", "deleted"],
              ["fourth", "recycled", "deleted"]
            ]
          )
        })
      )
  )

  it.live(
    "an agent's workspace warns when the user's checkout has uncommitted changes, and does not include them",
    () =>
      provide(
        Effect.gen(function* () {
          const clean = yield* makeRepo
          const dirty = yield* makeRepo
          fs.writeFileSync(path.join(dirty, "a.txt"), "not committed\n")
          const ws = yield* Workspace
          const acquire = (repo: string) => ws.acquire({ repo, runId: "warn", agentId: "agent", recycle: true })
          const quiet = yield* Effect.scoped(acquire(clean))
          assert.deepStrictEqual(quiet.warnings, [])
          const warned = yield* Effect.scoped(
            Effect.map(acquire(dirty), (handle) => ({
              warnings: handle.warnings,
              a: fs.readFileSync(path.join(handle.dir, "a.txt"), "utf8")
            }))
          )
          const head = sh(dirty, "rev-parse", "HEAD")
          assert.deepStrictEqual(warned.warnings, [
            `${dirty} has uncommitted changes; workspaces start from commit ${head} and do not include them`
          ])
          assert.strictEqual(warned.a, lines10("a"))
        })
      )
  )

  it.live(
    "files left after the commit are cleaned when ignored and keep the worktree when not, never reach the next agent",
    () =>
      provide(
        Effect.gen(function* () {
          const repo = yield* makeRepo
          commitIgnore(repo, "*.log\n")
          const ws = yield* Workspace
          const { reports, onRelease } = releases()
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* ws.registerRun(repo, "late")
              const integration = yield* ws.integration({ repo, runId: "late" })
              const acquire = (agentId: string) =>
                Effect.flatMap(integration.head(), (base) =>
                  ws.acquire({ repo, runId: "late", agentId, base, recycle: true, onRelease })
                )
              const work = (agentId: string, late: string) =>
                Effect.scoped(
                  Effect.gen(function* () {
                    const handle = yield* acquire(agentId)
                    fs.writeFileSync(path.join(handle.dir, `${agentId}.txt`), `${agentId} was here\n`)
                    fs.writeFileSync(path.join(handle.dir, "early.log"), "ignored, there at the commit")
                    yield* integration.commitAll(handle, `${agentId} edits`)
                    assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
                    fs.writeFileSync(path.join(handle.dir, late), "written after the commit")
                    return handle.dir
                  })
                )
              yield* work("first", "late.log")
              const second = yield* acquire("second")
              assert.strictEqual(sh(second.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
              yield* Effect.scoped(work("third", "late.txt"))
              const fourth = yield* acquire("fourth")
              assert.strictEqual(sh(fourth.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
            })
          )
          const outcome = (agentId: string) => reports.find((r) => r.agentId === agentId)
          assert.strictEqual(outcome("first")?.workspace, "recycled")
          assert.strictEqual(outcome("third")?.workspace, "kept")
          assert.strictEqual(
            fs.readFileSync(path.join(repo, ".corral", "worktrees", "late", "third", "late.txt"), "utf8"),
            "written after the commit"
          )
        })
      )
  )

  for (const lent of [false, true]) {
    it.live(
      `merged branches of recycled worktrees are deleted together when the run ends, unless one moved${lent ? " (lent at the commit)" : ""}`,
      () =>
        provide(
          Effect.gen(function* () {
            const repo = yield* makeRepo
            const ws = yield* Workspace
            const corralBranches = () =>
              sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/").split("\n").sort()
            yield* Effect.scoped(
              Effect.gen(function* () {
                yield* ws.registerRun(repo, "batch")
                const integration = yield* ws.integration({ repo, runId: "batch" })
                const agent = (agentId: string, file: string) =>
                  Effect.scoped(
                    Effect.gen(function* () {
                      const base = yield* integration.head()
                      const handle = yield* ws.acquire({ repo, runId: "batch", agentId, base, recycle: true })
                      yield* edit(handle, file, `${agentId} was here\n`)
                      const commit = integration.commitAll(handle, agentId)
                      yield* lent ? ws.recycleAfter(handle, commit) : commit
                      assert.strictEqual((yield* integration.merge(handle))._tag, "Merged")
                    })
                  )
                yield* agent("one", "a.txt")
                assert.deepStrictEqual(corralBranches(), ["corral/batch/integration", "corral/batch/one"])
                yield* agent("one", "d.txt")
                yield* agent("two", "b.txt")
                yield* agent("three", "c.txt")
                assert.deepStrictEqual(corralBranches(), [
                  "corral/batch/integration",
                  "corral/batch/one",
                  "corral/batch/three",
                  "corral/batch/two"
                ])
                sh(repo, "update-ref", "refs/heads/corral/batch/three", sh(repo, "rev-parse", "main"))
              })
            )
            assert.deepStrictEqual(corralBranches(), ["corral/batch/integration", "corral/batch/three"])
            assert.strictEqual(worktreeCount(repo), 1)
            const merged = sh(repo, "show", "corral/batch/integration:d.txt")
            assert.strictEqual(merged, "one was here")
            assert.strictEqual(sh(repo, "show", "corral/batch/integration:c.txt"), "three was here")
          })
        )
    )
  }

  for (const history of ["merge", "squash", "linear"] as const) {
    it.live(
      `a worktree lent at its agent's commit goes to the next agent byte-clean while the work merges (${history})`,
      () =>
        provide(
          Effect.gen(function* () {
            const repo = yield* makeRepo
            commitIgnore(repo, "build/\n")
            const ws = yield* Workspace
            const { reports, onRelease } = releases()
            yield* Effect.scoped(
              Effect.gen(function* () {
                yield* ws.registerRun(repo, "lend")
                const integration = yield* ws.integration({ repo, runId: "lend", history })
                const acquire = (agentId: string, base: string) =>
                  ws.acquire({ repo, runId: "lend", agentId, base, recycle: true, onRelease })
                const base = yield* integration.head()
                const firstScope = yield* Scope.make()
                const first = yield* acquire("first", base).pipe(Scope.provide(firstScope))
                fs.writeFileSync(path.join(first.dir, "a.txt"), "first was here\n")
                fs.mkdirSync(path.join(first.dir, "build"))
                fs.writeFileSync(path.join(first.dir, "build", "out.bin"), "first's ignored output")
                const committed = yield* ws.recycleAfter(first, integration.commitAll(first, "first edits"))
                assert.isTrue(committed.changed)
                const second = yield* acquire("second", base)
                assert.isFalse(fs.existsSync(first.dir), "the second agent got the first's worktree")
                assert.strictEqual(sh(second.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
                assert.strictEqual(fs.readFileSync(path.join(second.dir, "a.txt"), "utf8"), lines10("a"))
                assert.strictEqual(sh(second.dir, "symbolic-ref", "HEAD"), "refs/heads/corral/lend/second")
                assert.strictEqual((yield* integration.merge(first))._tag, "Merged")
                yield* Scope.close(firstScope, Exit.void)
                assert.deepStrictEqual(
                  reports.map((r) => [r.agentId, r.workspace, r.branch]),
                  [["first", "recycled", "deleted"]]
                )
                fs.writeFileSync(path.join(second.dir, "b.txt"), "second was here\n")
                yield* integration.commitAll(second, "second edits")
                assert.strictEqual((yield* integration.merge(second))._tag, "Merged")
              })
            )
            assert.strictEqual(sh(repo, "show", "corral/lend/integration:a.txt"), "first was here")
            assert.strictEqual(sh(repo, "show", "corral/lend/integration:b.txt"), "second was here")
            assert.strictEqual(
              sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/"),
              "corral/lend/integration"
            )
            assert.strictEqual(worktreeCount(repo), 1)
          })
        )
    )
  }

  it.live(
    "a conflict after the worktree was lent keeps the branch and the report, whether the worktree was reused or not",
    () =>
      provide(
        Effect.gen(function* () {
          const repo = yield* makeRepo
          const ws = yield* Workspace
          const { reports, onRelease } = releases()
          const corralBranches = () =>
            sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/").split("\n").sort()
          yield* Effect.scoped(
            Effect.gen(function* () {
              yield* ws.registerRun(repo, "clash")
              const integration = yield* ws.integration({ repo, runId: "clash" })
              const acquire = (agentId: string, base: string) =>
                ws.acquire({ repo, runId: "clash", agentId, base, recycle: true, onRelease })
              const base = yield* integration.head()
              const scopes = { loser: yield* Scope.make(), idle: yield* Scope.make() }
              const loser = yield* acquire("loser", base).pipe(Scope.provide(scopes.loser))
              const idle = yield* acquire("idle", base).pipe(Scope.provide(scopes.idle))
              yield* Effect.scoped(
                Effect.gen(function* () {
                  const winner = yield* acquire("winner", base)
                  yield* edit(winner, "a.txt", "winner's a\n")
                  yield* integration.commitAll(winner, "winner")
                  assert.strictEqual((yield* integration.merge(winner))._tag, "Merged")
                })
              )
              yield* edit(loser, "a.txt", "loser's a\n")
              yield* ws.recycleAfter(loser, integration.commitAll(loser, "loser"))
              yield* edit(idle, "a.txt", "idle's a\n")
              yield* ws.recycleAfter(idle, integration.commitAll(idle, "idle"))
              const reuser = yield* acquire("reuser", yield* integration.head())
              const lentDirs = [loser.dir, idle.dir].filter((dir) => !fs.existsSync(dir))
              assert.strictEqual(lentDirs.length, 1, "one lent worktree went to the reuser, one is still in the pool")
              const loserMerge = yield* integration.merge(loser)
              assert.strictEqual(loserMerge._tag, "Conflict")
              yield* Scope.close(scopes.loser, Exit.void)
              assert.strictEqual((yield* integration.merge(idle))._tag, "Conflict")
              yield* Scope.close(scopes.idle, Exit.void)
              assert.deepStrictEqual(
                reports
                  .filter((r) => r.agentId !== "winner")
                  .map((r) => [r.agentId, r.workspace, r.branch, r.reasons.join("; ")]),
                [
                  ["loser", "recycled", "kept", "corral/clash/loser has commits that are not merged"],
                  ["idle", "recycled", "kept", "corral/clash/idle has commits that are not merged"]
                ]
              )
              assert.strictEqual(sh(repo, "show", "corral/clash/loser:a.txt"), "loser's a")
              assert.strictEqual(sh(repo, "show", "corral/clash/idle:a.txt"), "idle's a")
              const checkedOut = sh(repo, "worktree", "list", "--porcelain")
              assert.notInclude(checkedOut, "refs/heads/corral/clash/loser")
              assert.notInclude(checkedOut, "refs/heads/corral/clash/idle")
              assert.strictEqual(fs.readFileSync(path.join(reuser.dir, "a.txt"), "utf8"), "winner's a\n")
              const next = yield* acquire("next", yield* integration.head())
              assert.strictEqual(sh(next.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
              assert.strictEqual(sh(next.dir, "symbolic-ref", "HEAD"), "refs/heads/corral/clash/next")
            })
          )
          assert.deepStrictEqual(corralBranches(), [
            "corral/clash/idle",
            "corral/clash/integration",
            "corral/clash/loser"
          ])
          assert.strictEqual(worktreeCount(repo), 1)
        })
      )
  )

  it.live("an acquire adds one spare worktree while the only one to reuse awaits its commit, then waits", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* ws.registerRun(repo, "spare")
            const integration = yield* ws.integration({ repo, runId: "spare" })
            const base = yield* integration.head()
            const acquire = (agentId: string) => ws.acquire({ repo, runId: "spare", agentId, base, recycle: true })
            const first = yield* acquire("first")
            yield* edit(first, "a.txt", "first was here\n")
            const [started, gate] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
            const commit = Deferred.succeed(started, undefined).pipe(
              Effect.andThen(Deferred.await(gate)),
              Effect.andThen(integration.commitAll(first, "first"))
            )
            const committing = yield* Effect.forkChild(ws.recycleAfter(first, commit))
            yield* Deferred.await(started)
            const spare = yield* acquire("spare")
            assert.isTrue(fs.existsSync(first.dir), "the spare is a new worktree")
            assert.strictEqual(worktreeCount(repo), 3)
            const waiting = yield* Effect.forkChild(acquire("waiting"))
            yield* Deferred.succeed(gate, undefined)
            yield* Fiber.join(committing)
            const reused = yield* Fiber.join(waiting)
            assert.isFalse(fs.existsSync(first.dir), "the next acquire waited for the committed worktree")
            assert.strictEqual(worktreeCount(repo), 3)
            assert.strictEqual(fs.readFileSync(path.join(reused.dir, "a.txt"), "utf8"), lines10("a"))
            assert.strictEqual(sh(reused.dir, "status", "--porcelain", "--ignored", "--untracked-files=all"), "")
            assert.strictEqual(sh(spare.dir, "symbolic-ref", "HEAD"), "refs/heads/corral/spare/spare")
          })
        )
        assert.strictEqual(worktreeCount(repo), 1)
      })
    )
  )

  it.live("an agent interrupted right after lending its worktree leaves only its unmerged branch", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        const { reports, onRelease } = releases()
        const exit = yield* Effect.exit(
          Effect.scoped(
            Effect.gen(function* () {
              yield* ws.registerRun(repo, "stop")
              const integration = yield* ws.integration({ repo, runId: "stop" })
              const base = yield* integration.head()
              const agent = yield* ws.acquire({ repo, runId: "stop", agentId: "agent", base, recycle: true, onRelease })
              yield* edit(agent, "a.txt", "agent was here\n")
              yield* ws.recycleAfter(agent, integration.commitAll(agent, "agent"))
              return yield* Effect.interrupt
            })
          )
        )
        assert.isTrue(Exit.hasInterrupts(exit))
        assert.deepStrictEqual(
          reports.map((r) => [r.agentId, r.workspace, r.branch]),
          [["agent", "recycled", "kept"]]
        )
        assert.strictEqual(worktreeCount(repo), 1)
        assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "stop")))
        assert.strictEqual(sh(repo, "show", "corral/stop/agent:a.txt"), "agent was here")
        assert.strictEqual(sh(repo, "status", "--porcelain", "--untracked-files=all"), "")
      })
    )
  )

  it.live("a set-up interrupted at any instant leaves no worktree, branch or folder behind", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        for (const dir of ["pkg", "other"]) {
          fs.mkdirSync(path.join(repo, dir))
          for (let i = 0; i < 50; i++) fs.writeFileSync(path.join(repo, dir, `f${i}.txt`), `${dir} ${i}\n`)
        }
        sh(repo, "add", ".")
        sh(repo, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "folders")
        const ws = yield* Workspace
        const reports: Array<ReleaseReport> = []
        const attempts = [0, 5, 15, 30, 50, 80, 120, 200].flatMap((delay) => [
          { delay, sparse: ["pkg"] },
          { delay, sparse: undefined }
        ])
        for (const [i, { delay, sparse }] of attempts.entries()) {
          const fiber = yield* Effect.forkChild(
            Effect.scoped(
              ws
                .acquire({
                  repo,
                  runId: "int",
                  agentId: `a${i}`,
                  sparse,
                  onRelease: (r) => Effect.sync(() => reports.push(r))
                })
                .pipe(Effect.andThen(Effect.never))
            )
          )
          yield* Effect.sleep(delay)
          yield* Fiber.interrupt(fiber)
          const at = `interrupted after ${delay} ms (${sparse === undefined ? "full" : "sparse"} checkout)`
          assert.strictEqual(worktreeCount(repo), 1, at)
          assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "", at)
          assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "int")), at)
        }
        for (const report of reports) {
          assert.notStrictEqual(report.dir, repo)
          assert.notStrictEqual(report.workspace, "kept", report.reasons.join("; "))
        }
        assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "int")))
      })
    )
  )

  it.live(
    "commitAll reads its commit and parent back from the reflog, and asks git after concluding a merge left in progress",
    () =>
      provide(
        Effect.gen(function* () {
          const repo = yield* makeRepo
          const ws = yield* Workspace
          const author = { name: "Ann Author", email: "ann@example.com" }
          const committer = { name: "Cy Committer", email: "cy@example.com" }
          const integration = yield* ws.integration({ repo, runId: "rw", author, committer })
          const handle = yield* ws.acquire({ repo, runId: "rw", agentId: "w", base: yield* integration.head() })
          const unchanged = yield* integration.commitAll(handle, "nothing yet")
          assert.deepStrictEqual(unchanged, { commit: sh(handle.dir, "rev-parse", "HEAD"), changed: false })
          const base = sh(handle.dir, "rev-parse", "HEAD")
          yield* edit(handle, "a.txt", "edited\n")
          yield* edit(handle, "new.txt", "untracked before\n")
          const message = "\n\n  subject kept indented  \n\n\n\nbody\t \r\n# not a comment\n\n"
          const made = yield* integration.commitAll(handle, message)
          assert.isTrue(made.changed)
          assert.strictEqual(sh(handle.dir, "rev-parse", "HEAD"), made.commit)
          assert.strictEqual(sh(handle.dir, "status", "--porcelain", "--untracked-files=all"), "")
          const ours = sh(handle.dir, "cat-file", "commit", made.commit)
          sh(handle.dir, "reset", "--quiet", "--soft", base)
          const full = `${message.replace(/\s+$/, "")}\n\nCorral-Run: rw\nCorral-Agent: w`
          execFileSync("git", ["commit", "--quiet", "--no-verify", "-m", full], {
            cwd: handle.dir,
            env: {
              ...process.env,
              LC_ALL: "C",
              GIT_AUTHOR_NAME: author.name,
              GIT_AUTHOR_EMAIL: author.email,
              GIT_COMMITTER_NAME: committer.name,
              GIT_COMMITTER_EMAIL: committer.email
            }
          })
          const withoutDates = (commit: string) => commit.replace(/> \d+ [+-]\d{4}$/gm, ">")
          assert.strictEqual(withoutDates(ours), withoutDates(sh(handle.dir, "cat-file", "commit", "HEAD")))
          const [gits, , ourEntry] = sh(handle.dir, "log", "-g", "--format=%H %gs", "HEAD").split("\n")
          assert.strictEqual(ourEntry, `${made.commit} ${gits!.slice(41)}`)
          assert.strictEqual(gits!.slice(41), "commit: subject kept indented")
          const before = sh(handle.dir, "rev-parse", "HEAD")
          yield* edit(handle, "c.txt", "edited\n")
          const direct = yield* commitWork(handle, { runId: "rw", message: "direct", author, committer })
          assert.deepStrictEqual(
            { commit: direct.commit, parents: direct.parents, changed: direct.changed },
            { commit: sh(handle.dir, "rev-parse", "HEAD"), parents: [before], changed: true }
          )
          const side = sh(handle.dir, "rev-parse", "HEAD")
          sh(handle.dir, "checkout", "--quiet", "-b", "side", base)
          yield* edit(handle, "b.txt", "side edit\n")
          sh(handle.dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "side")
          const sideTip = sh(handle.dir, "rev-parse", "HEAD")
          sh(handle.dir, "checkout", "--quiet", side)
          sh(handle.dir, "-c", "user.name=t", "-c", "user.email=t@t", "merge", "--no-commit", "--no-ff", "side")
          const merged = yield* integration.commitAll(handle, "merge in progress")
          assert.isTrue(merged.changed)
          assert.strictEqual(sh(handle.dir, "log", "-1", "--format=%P", merged.commit), `${side} ${sideTip}`)
          assert.isFalse(fs.existsSync(path.join(sh(handle.dir, "rev-parse", "--absolute-git-dir"), "MERGE_HEAD")))
        }).pipe(Effect.scoped)
      )
  )
})
