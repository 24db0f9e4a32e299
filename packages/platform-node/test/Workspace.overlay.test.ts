import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { findUnshare, layersOf, mountPrefix, overlayProblem } from "../src/internal/workspaceOverlay.ts"
import { overlayPrefix, type ReleaseReport, Workspace, type WorkspaceHandle } from "../src/Workspace.ts"
import { killWhenReady, workspaceModule } from "./support/killedRun.ts"

// With CI=true a machine that cannot mount an overlay runs these tests and fails them; elsewhere they are skipped.
const enabled = overlayProblem() === undefined || process.env.CI === "true"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const commit = (root: string, message: string) => {
  sh(root, "add", "--all")
  sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", message)
  return sh(root, "rev-parse", "HEAD")
}

const write = (root: string, file: string, text: string) => {
  fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
  fs.writeFileSync(path.join(root, file), text)
}

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-overlay-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    for (const file of [
      "a.txt",
      "b.txt",
      "src/x/one.ts",
      "src/x/two.ts",
      "src/y/three.ts",
      "gone/four.txt",
      "run.sh"
    ]) {
      write(root, file, `${file}\n`)
    }
    write(root, ".gitignore", "*.log\n")
    commit(root, "initial")
    return root
  }),
  (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
)

/** Runs `script` with `sh -c` in the workspace's view (the overlay's mount, or the worktree itself). */
const inView = (handle: WorkspaceHandle, script: string) =>
  Effect.sync(() => {
    const prefix = overlayPrefix(handle) ?? []
    const [file, ...args] = [...prefix, "sh", "-c", script]
    return execFileSync(file!, args, { cwd: handle.dir, encoding: "utf8" })
  })

const edits = [
  "printf 'changed\\n' >> a.txt",
  "rm b.txt",
  "printf 'new\\n' > src/x/new.ts",
  "chmod +x run.sh",
  "ln -s a.txt link",
  "printf 'ignored\\n' > debug.log",
  "rm -rf gone",
  "rm -rf src/y && mkdir src/y && printf 'again\\n' > src/y/fresh.ts"
].join(" && ")

const treeOf = (root: string, rev: string) => sh(root, "ls-tree", "-r", "--full-tree", rev)

const provide = <A, E>(effect: Effect.Effect<A, E, Workspace | Scope.Scope>) =>
  effect.pipe(Effect.provide(Workspace.layer))

const releases = () => {
  const reports: Array<ReleaseReport> = []
  return { reports, onRelease: (report: ReleaseReport) => Effect.sync(() => reports.push(report)) }
}

/** The start of a child process's run script: its imports, the repository, and a command run in an overlay's view. */
const runPrelude = `
import { execFileSync } from "node:child_process"
import * as Effect from "effect/Effect"
import { overlayPrefix, Workspace } from ${JSON.stringify(workspaceModule)}
const repo = process.env.CORRAL_TEST_REPO
const inView = (handle, script) => {
  const [file, ...args] = [...overlayPrefix(handle), "sh", "-c", script]
  execFileSync(file, args, { cwd: handle.dir })
}`

/**
 * A run that commits two overlay agents' edits (`CORRAL_TEST_EDITS`, then a new file on top of that
 * commit), changes the second agent's file again, and waits to be killed: its releases never run,
 * and the commits it remembered die with it.
 */
const committingRun = `${runPrelude}
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "killed")
  const integration = yield* ws.integration({ repo, runId: "killed" })
  const clean = yield* ws.acquire({ repo, runId: "killed", agentId: "clean", overlay: true })
  inView(clean, process.env.CORRAL_TEST_EDITS)
  const base = (yield* integration.commitAll(clean, "clean")).commit
  const dirty = yield* ws.acquire({ repo, runId: "killed", agentId: "dirty", overlay: true, base })
  inView(dirty, "printf 'dirty\\\\n' > dirty.txt")
  yield* integration.commitAll(dirty, "dirty")
  inView(dirty, "printf 'after the commit\\\\n' >> a.txt")
  console.log("ready")
  yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

/**
 * A run that sets up three overlay agents — one writes a file, one deletes a tracked file (a
 * whiteout is all its upper folder holds), one does nothing — and waits to be killed.
 */
const uncommittedRun = `${runPrelude}
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "lost")
  const acquire = (agentId) => ws.acquire({ repo, runId: "lost", agentId, overlay: true })
  inView(yield* acquire("wrote"), "printf 'never committed\\n' > wip.txt")
  inView(yield* acquire("deleted"), "rm b.txt")
  yield* acquire("idle")
  console.log("ready")
  yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

const removeRegistration = (dir: string) => {
  const gitDir = fs
    .readFileSync(path.join(dir, ".git"), "utf8")
    .replace(/^gitdir: /, "")
    .trim()
  fs.rmSync(gitDir, { recursive: true })
}

/**
 * Ways a dead overlay workspace's worktree registration (or its `.git` file) goes missing before gc
 * runs; the last one also leaves a file of the user's in the folder outside the mount.
 */
const registrationLosses: ReadonlyArray<readonly [string, (repo: string, dir: string) => void]> = [
  ["`git worktree remove --force` of its folder", (repo, dir) => sh(repo, "worktree", "remove", "--force", dir)],
  ["its registration removed (the folder with its .git file left)", (_repo, dir) => removeRegistration(dir)],
  [
    "its .git file removed and `git worktree prune` (an empty folder left)",
    (repo, dir) => {
      fs.rmSync(path.join(dir, ".git"))
      sh(repo, "worktree", "prune")
    }
  ],
  [
    "its .git file removed (registered, git cannot be asked in its mount)",
    (_repo, dir) => fs.rmSync(path.join(dir, ".git"))
  ],
  [
    "its registration removed and a file put in its folder outside the mount",
    (_repo, dir) => {
      removeRegistration(dir)
      fs.writeFileSync(path.join(dir, "notes.txt"), "mine\n")
    }
  ]
]

/** The mounts of this namespace and the command lines of live processes that name `dir`. */
const leftOver = (dir: string) => {
  const mounts = fs
    .readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((line) => line.includes(dir))
  const commands = fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")
      } catch {
        return ""
      }
    })
    .filter((command) => command.includes(dir))
  return [...mounts, ...commands]
}

describe.skipIf(!enabled)("Workspace overlay", () => {
  it.live("an overlay agent sees its base tree, and its commit equals a worktree agent's for the same commands", () =>
    provide(
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const ws = yield* Workspace
        yield* ws.registerRun(repo, "r1")
        const integration = yield* ws.integration({ repo, runId: "r1" })
        const base = yield* integration.head()
        const over = yield* ws.acquire({ repo, runId: "r1", agentId: "over", base, overlay: true })
        const plain = yield* ws.acquire({ repo, runId: "r1", agentId: "plain", base })
        assert.deepStrictEqual(fs.readdirSync(over.dir), [".git"])
        const seen = yield* inView(over, "find . -path ./.git -prune -o -type f -print | sort")
        const expected = yield* inView(plain, "find . -path ./.git -prune -o -type f -print | sort")
        assert.strictEqual(seen, expected)
        assert.strictEqual(yield* inView(over, "git status --porcelain"), "")
        yield* inView(over, edits)
        yield* inView(plain, edits)
        const status = yield* inView(over, "git status --porcelain --untracked-files=all")
        assert.strictEqual(status, yield* inView(plain, "git status --porcelain --untracked-files=all"))
        const a = yield* integration.commitAll(over, "edit")
        const b = yield* integration.commitAll(plain, "edit")
        assert.isTrue(a.changed)
        assert.strictEqual(treeOf(repo, a.commit), treeOf(repo, b.commit))
        assert.notInclude(treeOf(repo, a.commit), "debug.log")
        assert.include(treeOf(repo, a.commit), "src/y/fresh.ts")
        assert.notInclude(treeOf(repo, a.commit), "src/y/three.ts")
        assert.notInclude(treeOf(repo, a.commit), "gone/")
        assert.match(treeOf(repo, a.commit), /^100755 blob \w+\trun\.sh$/m)
        assert.match(treeOf(repo, a.commit), /^120000 blob \w+\tlink$/m)
        assert.strictEqual(fs.readFileSync(path.join(repo, "a.txt"), "utf8"), "a.txt\n")
      })
    ).pipe(Effect.scoped)
  )

  it.live("agents at different heads see different snapshots, never another agent's files; all is removed", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const stateDir = path.join(repo, ".corral")
      const first = sh(repo, "rev-parse", "HEAD")
      write(repo, "a.txt", "second\n")
      fs.rmSync(path.join(repo, "src/y"), { recursive: true })
      write(repo, "src/y", "now a file\n")
      const second = commit(repo, "second")
      const log = releases()
      yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          yield* ws.registerRun(repo, "r2")
          const one = yield* ws.acquire({ repo, runId: "r2", agentId: "one", base: first, overlay: true, ...log })
          const two = yield* ws.acquire({ repo, runId: "r2", agentId: "two", base: second, overlay: true, ...log })
          const three = yield* ws.acquire({ repo, runId: "r2", agentId: "three", base: first, overlay: true, ...log })
          assert.strictEqual(yield* inView(one, "cat a.txt"), "a.txt\n")
          assert.strictEqual(yield* inView(two, "cat a.txt"), "second\n")
          assert.strictEqual(yield* inView(two, "cat src/y"), "now a file\n")
          assert.strictEqual(yield* inView(two, "git status --porcelain"), "")
          yield* inView(one, "printf mine > secret.txt && printf one >> a.txt")
          assert.strictEqual(
            yield* inView(three, "ls secret.txt 2>&1 || true"),
            "ls: cannot access 'secret.txt': No such file or directory\n"
          )
          assert.strictEqual(yield* inView(three, "cat a.txt"), "a.txt\n")
          assert.strictEqual(
            sh(repo, "ls-files", "--with-tree", second, "--", "src/y"),
            sh(repo, "ls-tree", "--name-only", second, "--", "src/y")
          )
          assert.deepStrictEqual(
            fs.readdirSync(path.join(stateDir, "overlay", "r2", "snapshots")).sort(),
            [first, `${first}.index`, second, `${second}.index`].sort()
          )
          const integration = yield* ws.integration({ repo, runId: "r2", base: first })
          yield* integration.commitAll(one, "one")
        }).pipe(Effect.scoped)
      )
      assert.deepStrictEqual(
        log.reports.map((r) => [r.agentId, r.workspace]),
        [
          ["three", "removed"],
          ["two", "removed"],
          ["one", "removed"]
        ]
      )
      assert.isFalse(fs.existsSync(path.join(stateDir, "overlay", "r2")))
      assert.isFalse(fs.existsSync(path.join(stateDir, "worktrees", "r2")))
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
    })
  )

  it.live("uncommitted changes keep the workspace, its upper folder and its snapshot", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const log = releases()
      const scope = yield* Scope.make()
      const handle = yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          return yield* ws.acquire({ repo, runId: "r3", agentId: "dirty", overlay: true, ...log })
        })
      ).pipe(Scope.provide(scope))
      yield* inView(handle, "printf unsaved >> b.txt")
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(log.reports[0]?.workspace, "kept")
      assert.isTrue(fs.existsSync(path.join(handle.overlay!.upper, "b.txt")))
      assert.isTrue(fs.existsSync(path.join(handle.overlay!.lower, "b.txt")))
    })
  )

  /**
   * The release reports of one overlay agent that made `edits` and `last`, had them committed, and
   * then had `afterCommit` done to its workspace.
   */
  const releaseAfterCommit = (
    last: string,
    afterCommit: (repo: string, handle: WorkspaceHandle, commit: string) => Effect.Effect<void>
  ) =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const log = releases()
      yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          const integration = yield* ws.integration({ repo, runId: "r6" })
          const handle = yield* ws.acquire({ repo, runId: "r6", agentId: "a", overlay: true, ...log })
          yield* inView(handle, `${edits} && ${last}`)
          const made = yield* integration.commitAll(handle, "edit")
          assert.isTrue(made.changed)
          yield* afterCommit(repo, handle, made.commit)
        }).pipe(Effect.scoped)
      )
      return log.reports
    })

  it.live("after a commit the release mounts nothing: it removes the workspace with no overlay work folder", () =>
    Effect.gen(function* () {
      const reports = yield* releaseAfterCommit("printf 'last\n' > src/x/late.ts", (_repo, handle) =>
        Effect.sync(() => fs.rmSync(handle.overlay!.work, { recursive: true }))
      )
      assert.deepStrictEqual(
        reports.map((r) => [r.workspace, r.branch]),
        [["removed", "kept"]]
      )
    })
  )

  type AfterCommit = (repo: string, handle: WorkspaceHandle, commit: string) => Effect.Effect<void>

  const viewScript =
    (script: string): AfterCommit =>
    (_repo, handle) =>
      Effect.asVoid(inView(handle, script))

  /** Rewrites `file` in place with `text`, which must be of its size. */
  const sameSize = (file: string, text: string) =>
    `test $(wc -c < ${file}) -eq ${Buffer.byteLength(text)} && printf '${text}' > ${file}`

  /** Rewrites `file` in place with `text` (of its size) and sets its modification time back, to the nanosecond. */
  const restoringMtime = (file: string, text: string) =>
    `ref=$(mktemp) && touch -r ${file} "$ref" && ${sameSize(file, text)} && touch -m -r "$ref" ${file} && rm "$ref"`

  const afterCommit: ReadonlyArray<readonly [string, AfterCommit]> = [
    ["a rewrite to a shorter content", viewScript("printf 'A.txt\n' > a.txt")],
    ["a same-size rewrite", viewScript(sameSize("a.txt", "A.TXT\nCHANGED\n"))],
    ["a mode change", viewScript("chmod +x a.txt")],
    ["a deletion", viewScript("rm src/x/one.ts")],
    ["a file replaced by a folder", viewScript("rm a.txt && mkdir a.txt && printf 'in\n' > a.txt/in.txt")],
    ["a symbolic link retargeted", viewScript("ln -sfn b.txt link")],
    ["a new file", viewScript("printf 'late\n' > late.txt")],
    [
      "the branch moved back",
      // Without git: no reflog entry, the index as it was.
      (repo, handle, commit) =>
        Effect.sync(() =>
          fs.writeFileSync(
            path.join(repo, ".git", "refs", "heads", handle.branch!),
            `${sh(repo, "rev-parse", `${commit}~`)}\n`
          )
        )
    ],
    ["a committed file's rewrite", viewScript("printf 'new!\n' > src/x/new.ts")],
    [
      "a same-size rewrite with its modification time set back",
      viewScript(restoringMtime("a.txt", "A.TXT\nCHANGED\n"))
    ],
    [
      "a same-size rewrite through a hard link outside the mount, its modification time set back",
      (repo, handle) =>
        Effect.sync(() => {
          const alias = path.join(repo, "alias")
          fs.linkSync(path.join(handle.overlay!.upper, "a.txt"), alias)
          execFileSync("sh", ["-c", restoringMtime("alias", "A.TXT\nCHANGED\n")], { cwd: repo })
        })
    ],
    ["a folder replaced by a symbolic link to a folder", viewScript("rm -rf src/x && ln -s y src/x")],
    ["a folder moved aside behind a symbolic link to it", viewScript("mv src/x src/x2 && ln -s x2 src/x")]
  ]

  for (const [name, change] of afterCommit) {
    it.live(`${name} after the commit keeps the workspace`, () =>
      Effect.gen(function* () {
        const reports = yield* releaseAfterCommit("printf 'new\n' > src/x/new.ts", change)
        assert.deepStrictEqual(
          reports.map((r) => r.workspace),
          ["kept"]
        )
      })
    )
  }

  it.live("a file an exclude rule kept out of the commit keeps the workspace once the rule is gone", () =>
    Effect.gen(function* () {
      const exclude = '"$(git rev-parse --git-common-dir)/info/exclude"'
      const reports = yield* releaseAfterCommit(
        `mkdir -p "$(git rev-parse --git-common-dir)/info" && printf '*.tmp\\n' >> ${exclude} && printf 'scratch\\n' > scratch.tmp`,
        viewScript(`grep -v 'tmp' ${exclude} > rules; cat rules > ${exclude}; rm rules`)
      )
      assert.deepStrictEqual(
        reports.map((r) => r.workspace),
        ["kept"]
      )
    })
  )

  const cleanAfterCommit = [
    ["a touch of the modification time alone", "touch -m a.txt src/x/new.ts"],
    ["a modification time set back", "touch -m -d @1000000000 a.txt"],
    ["a rewrite with the same content", "printf 'new\n' > src/x/new.ts"]
  ] as const

  for (const [name, change] of cleanAfterCommit) {
    it.live(`${name} after the commit is no change: the workspace is removed`, () =>
      Effect.gen(function* () {
        const reports = yield* releaseAfterCommit("printf 'new\n' > src/x/new.ts", viewScript(change))
        assert.deepStrictEqual(
          reports.map((r) => [r.workspace, r.branch]),
          [["removed", "kept"]]
        )
      })
    )
  }

  it.live("a machine that cannot mount an overlay fails with OverlayUnavailable and creates nothing", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const saved = process.env.CORRAL_UNSHARE
      process.env.CORRAL_UNSHARE = path.join(repo, "no-such-unshare")
      const exit = yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          return yield* ws.acquire({ repo, runId: "r4", agentId: "a", overlay: true })
        }).pipe(Effect.scoped)
      ).pipe(
        Effect.exit,
        Effect.ensuring(
          Effect.sync(() => {
            if (saved === undefined) delete process.env.CORRAL_UNSHARE
            else process.env.CORRAL_UNSHARE = saved
          })
        )
      )
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(String(exit.cause), "OverlayUnavailable")
      assert.isFalse(fs.existsSync(path.join(repo, ".corral", "worktrees", "r4")))
      assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
    })
  )

  it.live(
    "kill -9 between the commit and the release: gc asks git in the mount, keeps only the changed workspace",
    () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const stateDir = path.join(repo, ".corral")
        const base = sh(repo, "rev-parse", "HEAD")
        yield* killWhenReady(committingRun, { CORRAL_TEST_REPO: repo, CORRAL_TEST_EDITS: edits })
        const dirtyBase = sh(repo, "rev-parse", "corral/killed/clean")
        const [clean, dirty] = [
          ["clean", base],
          ["dirty", dirtyBase]
        ].map(([agentId, commit]) => ({
          dir: path.join(stateDir, "worktrees", "killed", agentId!),
          layers: layersOf(stateDir, "killed", agentId!, commit!)
        }))
        const gc = provide(
          Effect.gen(function* () {
            const ws = yield* Workspace
            return yield* ws.gc({ repo })
          })
        ).pipe(Effect.scoped)
        const report = yield* gc
        assert.deepInclude(report.removed, { kind: "worktree", target: clean!.dir })
        assert.isTrue(report.kept.some((item) => item.kind === "worktree" && item.target === dirty!.dir))
        assert.isTrue(report.kept.some((item) => item.kind === "overlay"))
        const runDir = path.join(stateDir, "overlay", "killed")
        assert.deepStrictEqual(fs.readdirSync(path.join(runDir, "agents")), ["dirty"])
        assert.deepStrictEqual(fs.readdirSync(path.join(runDir, "snapshots")).sort(), [dirtyBase, `${dirtyBase}.index`])
        assert.strictEqual(
          fs.readFileSync(path.join(dirty!.layers.upper, "a.txt"), "utf8"),
          "a.txt\nchanged\nafter the commit\n"
        )
        assert.deepStrictEqual(leftOver(repo), [])
        const [unshare, ...args] = mountPrefix(findUnshare()!, dirty!.layers, dirty!.dir)
        execFileSync(unshare!, [...args, "git", "checkout", "--", "a.txt"], { cwd: dirty!.dir })
        const again = yield* gc
        assert.deepInclude(again.removed, { kind: "worktree", target: dirty!.dir })
        assert.deepStrictEqual(
          again.kept.filter((item) => item.kind !== "branch"),
          []
        )
        assert.isFalse(fs.existsSync(path.join(stateDir, "overlay")))
        assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
        assert.deepStrictEqual(leftOver(repo), [])
      })
  )

  for (const [how, lose] of registrationLosses) {
    it.live(`kill -9, then ${how}: gc keeps the upper folders that hold work, and says where`, () =>
      Effect.gen(function* () {
        const repo = yield* makeRepo
        const stateDir = path.join(repo, ".corral")
        const base = sh(repo, "rev-parse", "HEAD")
        yield* killWhenReady(uncommittedRun, { CORRAL_TEST_REPO: repo })
        const agentDir = (agentId: string) => path.join(stateDir, "overlay", "lost", "agents", agentId)
        const upper = (agentId: string) => layersOf(stateDir, "lost", agentId, base).upper
        const folder = (agentId: string) => path.join(stateDir, "worktrees", "lost", agentId)
        for (const agentId of ["wrote", "deleted", "idle"]) lose(repo, folder(agentId))
        const userFile = fs.existsSync(path.join(folder("idle"), "notes.txt"))
        const keptFolders = userFile ? ["deleted", "idle", "wrote"].map(folder) : []
        const gc = provide(
          Effect.gen(function* () {
            const ws = yield* Workspace
            return yield* ws.gc({ repo })
          })
        ).pipe(Effect.scoped)
        for (const round of [1, 2]) {
          const report = yield* gc
          assert.strictEqual(fs.readFileSync(path.join(upper("wrote"), "wip.txt"), "utf8"), "never committed\n")
          assert.isTrue(fs.lstatSync(path.join(upper("deleted"), "b.txt")).isCharacterDevice())
          for (const agentId of ["wrote", "deleted"]) {
            const item = report.kept.find((kept) => kept.reason.includes(upper(agentId)))
            assert.isDefined(item, `round ${round}: ${agentId} is reported kept: ${JSON.stringify(report.kept)}`)
            assert.include(item!.reason, "by hand")
          }
          assert.isFalse(report.kept.some((kept) => kept.reason.includes(upper("idle"))))
          assert.deepStrictEqual(
            report.kept.filter((kept) => kept.kind === "directory").map((kept) => kept.target),
            keptFolders
          )
          assert.deepStrictEqual(fs.readdirSync(path.join(stateDir, "overlay", "lost", "agents")).sort(), [
            "deleted",
            "wrote"
          ])
          assert.deepStrictEqual(fs.readdirSync(path.join(stateDir, "overlay", "lost", "snapshots")).sort(), [
            base,
            `${base}.index`
          ])
          assert.strictEqual(fs.existsSync(folder("idle")), userFile)
        }
        for (const agentId of ["wrote", "deleted"]) fs.rmSync(agentDir(agentId), { recursive: true })
        const last = yield* gc
        assert.deepStrictEqual(
          last.kept.filter((item) => item.kind !== "branch").map((item) => item.target),
          keptFolders
        )
        assert.isFalse(fs.existsSync(path.join(stateDir, "overlay")))
        assert.strictEqual(fs.existsSync(path.join(stateDir, "worktrees", "lost")), userFile)
        assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
        assert.deepStrictEqual(leftOver(repo), [])
      })
    )
  }

  it.live("kill -9, then gc where no overlay can be mounted: the upper folders decide, and the way out is named", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const stateDir = path.join(repo, ".corral")
      yield* killWhenReady(uncommittedRun, { CORRAL_TEST_REPO: repo })
      const folder = (agentId: string) => path.join(stateDir, "worktrees", "lost", agentId)
      const agentDir = (agentId: string) => path.join(stateDir, "overlay", "lost", "agents", agentId)
      const gc = provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          return yield* ws.gc({ repo })
        })
      ).pipe(Effect.scoped)
      const saved = process.env.CORRAL_UNSHARE
      const report = yield* Effect.acquireUseRelease(
        Effect.sync(() => {
          process.env.CORRAL_UNSHARE = path.join(repo, "no-such-unshare")
        }),
        () => gc,
        () =>
          Effect.sync(() => {
            if (saved === undefined) delete process.env.CORRAL_UNSHARE
            else process.env.CORRAL_UNSHARE = saved
          })
      )
      for (const agentId of ["wrote", "deleted"]) {
        const item = report.kept.find((kept) => kept.kind === "worktree" && kept.target === folder(agentId))
        assert.isDefined(item, JSON.stringify(report.kept))
        assert.include(item!.reason, "no-such-unshare")
        assert.include(item!.reason, `remove ${agentDir(agentId)} by hand`)
        assert.include(item!.reason, `git worktree remove --force ${folder(agentId)}`)
      }
      assert.deepInclude(report.removed, { kind: "worktree", target: folder("idle") })
      assert.deepStrictEqual(fs.readdirSync(path.join(stateDir, "overlay", "lost", "agents")).sort(), [
        "deleted",
        "wrote"
      ])
      for (const agentId of ["wrote", "deleted"]) {
        fs.rmSync(agentDir(agentId), { recursive: true })
        sh(repo, "worktree", "remove", "--force", folder(agentId))
      }
      const last = yield* gc
      assert.deepStrictEqual(
        last.kept.filter((item) => item.kind !== "branch"),
        []
      )
      assert.isFalse(fs.existsSync(path.join(stateDir, "overlay")))
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
    })
  )

  it.live("gc removes what a killed run's overlay workspaces left, and keeps one holding uncommitted work", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      const stateDir = path.join(repo, ".corral")
      // Scopes that are never closed: the run died without releasing anything.
      const leaked = yield* Scope.make()
      const [clean, dirty] = yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          const clean = yield* ws.acquire({ repo, runId: "dead", agentId: "clean", overlay: true })
          const dirty = yield* ws.acquire({ repo, runId: "dead", agentId: "dirty", overlay: true })
          return [clean, dirty] as const
        })
      ).pipe(Scope.provide(leaked))
      yield* inView(clean, "printf scratch > debug.log")
      yield* inView(dirty, "printf work >> a.txt")
      const report = yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          return yield* ws.gc({ repo })
        })
      ).pipe(Effect.scoped)
      assert.deepInclude(report.removed, { kind: "worktree", target: clean.dir })
      assert.isTrue(report.kept.some((item) => item.kind === "worktree" && item.target === dirty.dir))
      assert.isTrue(report.kept.some((item) => item.kind === "overlay"))
      assert.isTrue(fs.existsSync(path.join(dirty.overlay!.upper, "a.txt")))
      yield* inView(dirty, "git checkout -- a.txt")
      const again = yield* provide(
        Effect.gen(function* () {
          const ws = yield* Workspace
          return yield* ws.gc({ repo })
        })
      ).pipe(Effect.scoped)
      assert.deepStrictEqual(again.kept, [])
      assert.isFalse(fs.existsSync(path.join(stateDir, "overlay")))
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
      assert.strictEqual(sh(repo, "branch", "--list", "corral/*"), "")
    })
  )
})
