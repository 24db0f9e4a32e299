import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as DurationOption from "@corral/core/DurationOption"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { InvalidOption } from "../LeaseTables.ts"
import type { Config, GcItem, GcOptions, GcReport } from "../Workspace.ts"
import { git, lines } from "./git.ts"
import type { WorkspaceError } from "./workspaceErrors.ts"
import {
  baseFile,
  findUnshare,
  layersOf,
  overlayDirty,
  overlayProblem,
  runDirOf,
  upperHoldsWork
} from "./workspaceOverlay.ts"
import { attempt, exists, listDir, removePath } from "./workspaceFs.ts"
import { listRecordedRuns, readRecords, recordsPath, removeRecords } from "./runRegistry.ts"
import { isLeaseAlive, type LeaseFile, leasePath, readLeases } from "./workspaceLease.ts"
import {
  branchPrefix,
  integrationBranch,
  integrationName,
  isAncestor,
  type RepoInfo,
  type RepoLocks,
  resolveRepo,
  worktreeGitDir
} from "./workspaceRepo.ts"

interface WorktreeEntry {
  readonly path: string
  readonly branch: string | undefined
  /**
   * Locked by a `worktree add` that never finished: git locks the new worktree ("initializing") and
   * writes a placeholder `HEAD` until the add is over, so an add killed meanwhile leaves both for good.
   */
  readonly addKilled: boolean
}

interface Collector {
  readonly removed: Array<GcItem>
  readonly kept: Array<GcItem & { readonly reason: string }>
  readonly dryRun: boolean
  readonly keptBranches: Set<string>
  /** Files corral copied into worktrees (`copyFiles`): ignored, and corral's own. */
  readonly copies: ReadonlySet<string>
  /** Each dead run's overlay agents and their base commits, read once per run (see {@link overlayAgents}). */
  readonly overlays: Map<string, ReadonlyMap<string, string | undefined>>
}

const runOfBranch = (branch: string) => branch.slice(branchPrefix.length).split("/")[0]!

const listWorktrees = (root: string) =>
  git(["worktree", "list", "--porcelain"], { cwd: root }).pipe(
    Effect.map((out) =>
      out.split("\n\n").flatMap((block): Array<WorktreeEntry> => {
        const fields = lines(block)
        const worktree = fields.find((line) => line.startsWith("worktree "))
        const branch = fields.find((line) => line.startsWith("branch refs/heads/"))
        return worktree === undefined
          ? []
          : [
              {
                path: worktree.slice(9),
                branch: branch?.slice("branch refs/heads/".length),
                addKilled: fields.includes("locked initializing")
              }
            ]
      })
    )
  )

const listCorralBranches = (root: string) =>
  git(["for-each-ref", "--format=%(refname:short)", `refs/heads/${branchPrefix}`], { cwd: root }).pipe(
    Effect.map(lines)
  )

const reachableOutsideCorral = (root: string, tip: string) =>
  Effect.gen(function* () {
    if (yield* isAncestor(root, tip, "HEAD")) return true
    const containing = yield* git(
      ["for-each-ref", "--contains", tip, "--format=%(refname)", "refs/heads", "refs/tags"],
      {
        cwd: root
      }
    )
    return lines(containing).some((ref) => !ref.startsWith(`refs/heads/${branchPrefix}`))
  })

const act = (collector: Collector, item: GcItem, effect: Effect.Effect<unknown, WorkspaceError>) =>
  (collector.dryRun ? Effect.void : effect).pipe(
    Effect.andThen(Effect.sync(() => collector.removed.push(item))),
    Effect.catch((error) =>
      Effect.sync(() => collector.kept.push({ ...item, reason: `removal failed: ${error.message}` }))
    )
  )

const keep = (collector: Collector, item: GcItem, reason: string) =>
  Effect.sync(() => collector.kept.push({ ...item, reason }))

/**
 * Uncommitted changes, untracked files, or ignored files other than the ones corral copied in. Read
 * with `--no-optional-locks`: `status` would otherwise refresh the worktree's index, taking its
 * `index.lock` (a dry run would write, and a crashed run's agent that still runs there could find
 * the lock taken).
 */
const holdsUserFiles = (dir: string, copies: ReadonlySet<string>) =>
  git(["--no-optional-locks", "status", "--porcelain", "--untracked-files=all", "--ignored=matching"], {
    cwd: dir
  }).pipe(
    Effect.map((out) =>
      lines(out).some((line) => !(line.startsWith("!! ") && copies.has(path.join(dir, line.slice(3)))))
    )
  )

/**
 * Whether a worktree's set-up never finished: corral adds worktrees with `--no-checkout` and checks
 * them out afterwards, so a run killed in between leaves one without an index (and possibly some
 * files of a partial checkout, which are corral's, not the user's), or without its `.git` file (an
 * overlay workspace without it is judged by its upper folder instead: see {@link overlayWork}).
 */
const unfinishedSetUp = (dir: string) =>
  Effect.flatMap(worktreeGitDir(dir), (gitDir) =>
    gitDir === undefined
      ? Effect.succeed(true)
      : Effect.promise(() =>
          fs.access(path.join(gitDir, "index")).then(
            () => false,
            () => true
          )
        )
  )

/** The base commit of an agent of a dead run's overlay folder (`undefined` for one whose set-up wrote none). */
const baseOf = (stateDir: string, runId: string, agentId: string) =>
  Effect.promise(() =>
    fs.readFile(baseFile(layersOf(stateDir, runId, agentId, "")), "utf8").then(
      (text) => text.trim(),
      () => undefined
    )
  )

/**
 * The agent folders of a dead run's overlay folder, each with its base commit: read on first use
 * and kept for the rest of the gc (nothing gc removes before {@link pruneOverlay} changes them).
 */
const overlayAgents = (collector: Collector, stateDir: string, runId: string) =>
  Effect.gen(function* () {
    const known = collector.overlays.get(runId)
    if (known !== undefined) return known
    const agents = new Map<string, string | undefined>()
    for (const entry of yield* listDir(path.join(runDirOf(stateDir, runId), "agents"))) {
      if (entry.isDirectory) agents.set(entry.name, yield* baseOf(stateDir, runId, entry.name))
    }
    collector.overlays.set(runId, agents)
    return agents
  })

/**
 * A dead run's overlay workspace at `dir` (`<stateDir>/worktrees/<runId>/<agentId>`): its agent
 * folder, upper folder and layers (`undefined` when set-up wrote no base), or `undefined` when `dir`
 * is not one. Its folder holds only the `.git` file; its changes are in the upper folder, over the
 * snapshot of the base recorded at set-up.
 */
const overlayOf = (collector: Collector, stateDir: string, dir: string) =>
  Effect.gen(function* () {
    const agentId = path.basename(dir)
    const runId = path.basename(path.dirname(dir))
    const agents = yield* overlayAgents(collector, stateDir, runId)
    if (!agents.has(agentId)) return undefined
    const base = agents.get(agentId)
    const upper = layersOf(stateDir, runId, agentId, "").upper
    const layers = base === undefined ? undefined : layersOf(stateDir, runId, agentId, base)
    return { agentDir: path.dirname(upper), upper, layers }
  })

type DeadOverlay = NonNullable<Effect.Success<ReturnType<typeof overlayOf>>>

/** The files corral copied into the workspace at `dir`, relative to it. */
const copiesIn = (collector: Collector, dir: string) =>
  [...collector.copies].filter((file) => file.startsWith(dir + path.sep)).map((file) => path.relative(dir, file))

/**
 * Why gc keeps an overlay agent's upper folder that git cannot be asked about, and what to do; a
 * `worktree` git still lists with its `.git` file is removed by hand too (without the upper folder,
 * git outside the mount sees every file deleted).
 */
const unaskedReason = (overlay: DeadOverlay, why: string, worktree?: string) =>
  `its upper folder ${overlay.upper} may hold work that was never committed (${why}): copy what you need ` +
  `out of it (a character device there is a file the agent deleted), then remove ${overlay.agentDir} by hand` +
  (worktree === undefined ? "" : ` and run git worktree remove --force ${worktree}`)

/**
 * Why a dead overlay workspace must be kept, or `undefined` when it holds no work: `git status` in
 * its mount when it can be mounted, else any file of its upper folder (see {@link upperHoldsWork}).
 */
const overlayWork = (dir: string, overlay: DeadOverlay, gitFile: boolean, copies: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const unshare = findUnshare()
    const layers = overlay.layers
    const problem =
      overlayProblem() ??
      (layers === undefined || !(yield* exists(layers.lower))
        ? "the snapshot of its base is gone"
        : gitFile
          ? undefined
          : `${dir} or its .git file is gone`)
    if (problem === undefined && unshare !== undefined && layers !== undefined) {
      const dirty = yield* overlayDirty(unshare, layers, dir, [])
      return dirty ? `the overlay workspace has uncommitted changes (in ${overlay.upper})` : undefined
    }
    const holds = yield* upperHoldsWork(overlay.upper, copies)
    return holds ? unaskedReason(overlay, problem ?? "it cannot be mounted", gitFile ? dir : undefined) : undefined
  })

/** Why gc keeps a dead run's finished worktree at `dir`, or `undefined` when it holds nothing of the user's. */
const keepReason = (collector: Collector, dir: string, gitFile: boolean, overlay: DeadOverlay | undefined) =>
  overlay === undefined
    ? holdsUserFiles(dir, collector.copies).pipe(
        Effect.orElseSucceed(() => true),
        Effect.map((holds) =>
          holds ? "the worktree has uncommitted changes or ignored files corral did not create" : undefined
        )
      )
    : overlayWork(dir, overlay, gitFile, copiesIn(collector, dir)).pipe(
        Effect.catch((error) =>
          Effect.succeed(unaskedReason(overlay, `it could not be checked: ${error.message}`, gitFile ? dir : undefined))
        )
      )

/**
 * Removes a worktree whose `worktree add` was killed: `worktree prune` skips it and `worktree remove
 * --force` refuses it (it is locked), and its placeholder `HEAD` makes every command that reads all
 * worktrees' refs (`rev-list --all`, `fetch`) fail until it is gone.
 */
const removeLocked = (repo: RepoInfo, entry: WorktreeEntry) =>
  git(["worktree", "remove", "--force", "--force", "--", entry.path], { cwd: repo.root })

const collectWorktree = (
  repo: RepoInfo,
  locks: RepoLocks,
  collector: Collector,
  entry: WorktreeEntry,
  disposable: boolean,
  stateDir: string
) =>
  Effect.gen(function* () {
    const item: GcItem = { kind: "worktree", target: entry.path }
    const overlay = yield* overlayOf(collector, stateDir, entry.path)
    const present = yield* exists(entry.path)
    if (entry.addKilled) return yield* act(collector, item, locks(repo.commonDir).withPermit(removeLocked(repo, entry)))
    if (!present && overlay === undefined) return yield* act(collector, item, Effect.void)
    const gitFile = present && (yield* exists(path.join(entry.path, ".git")))
    const unfinished = (gitFile || overlay === undefined) && (yield* unfinishedSetUp(entry.path))
    const reason = disposable || unfinished ? undefined : yield* keepReason(collector, entry.path, gitFile, overlay)
    if (reason !== undefined) {
      if (entry.branch !== undefined) collector.keptBranches.add(entry.branch)
      return yield* keep(collector, item, reason)
    }
    if (!present) return yield* act(collector, item, Effect.void)
    const remove = git(["worktree", "remove", "--force", entry.path], { cwd: repo.root }).pipe(
      Effect.catch(
        (error): Effect.Effect<unknown, WorkspaceError> =>
          unfinished || !gitFile ? removePath(entry.path) : Effect.fail(error)
      )
    )
    yield* act(collector, item, locks(repo.commonDir).withPermit(remove))
  })

const branchVerdict = (root: string, branch: string, branches: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const run = runOfBranch(branch)
    const integration = integrationBranch(run)
    if (yield* reachableOutsideCorral(root, branch)) return undefined
    if (branch === integration) return `${branch} holds merged work that none of your branches contain yet`
    if (!branches.includes(integration)) return `${branch} has commits that none of your branches contain`
    if (yield* isAncestor(root, branch, integration)) return undefined
    return `${branch} has commits that are not merged into ${integration}`
  })

const collectBranch = (
  repo: RepoInfo,
  locks: RepoLocks,
  collector: Collector,
  branch: string,
  all: ReadonlyArray<string>,
  disposable: boolean
) =>
  Effect.gen(function* () {
    const item: GcItem = { kind: "branch", target: branch }
    if (collector.keptBranches.has(branch)) return yield* keep(collector, item, "its worktree was kept")
    const reason = disposable ? undefined : yield* branchVerdict(repo.root, branch, all)
    if (reason !== undefined) return yield* keep(collector, item, reason)
    yield* act(
      collector,
      item,
      locks(repo.commonDir).withPermit(git(["branch", "-D", "--quiet", branch], { cwd: repo.root }))
    )
  })

/**
 * The overlay workspaces of a dead run that git no longer lists (their folder or registration is
 * gone, so git cannot be asked in a mount): an upper folder that holds anything is kept with its
 * agent folder (and so its snapshot, see {@link collectOverlay}); the rest goes with the run.
 */
const keepUnlistedOverlays = (stateDir: string, collector: Collector, runId: string, registered: ReadonlySet<string>) =>
  Effect.gen(function* () {
    for (const entry of yield* listDir(path.join(runDirOf(stateDir, runId), "agents"))) {
      const dir = path.join(stateDir, "worktrees", runId, entry.name)
      const overlay = yield* overlayOf(collector, stateDir, dir)
      if (registered.has(dir) || overlay === undefined) continue
      const holds = yield* upperHoldsWork(overlay.upper, copiesIn(collector, dir)).pipe(
        Effect.orElseSucceed(() => true)
      )
      if (holds) {
        const why = `git no longer lists the worktree ${dir}, so it cannot be asked`
        yield* keep(collector, { kind: "overlay", target: overlay.agentDir }, unaskedReason(overlay, why))
      }
    }
  })

/** A leftover folder of nothing but corral's: empty, or an overlay workspace's holding only its `.git` file. */
const holdsNothing = (collector: Collector, stateDir: string, dir: string) =>
  Effect.gen(function* () {
    const entries = yield* listDir(dir)
    if (entries.length === 0) return true
    const onlyGitFile = entries.length === 1 && entries[0]!.name === ".git" && !entries[0]!.isDirectory
    return onlyGitFile && (yield* overlayOf(collector, stateDir, dir)) !== undefined
  })

const collectLeftoverDirs = (stateDir: string, collector: Collector, runId: string, registered: ReadonlySet<string>) =>
  Effect.gen(function* () {
    const runDir = path.join(stateDir, "worktrees", runId)
    for (const entry of yield* listDir(runDir)) {
      const dir = path.join(runDir, entry.name)
      if (registered.has(dir) || collector.kept.some((kept) => kept.target === dir)) continue
      const item: GcItem = { kind: "directory", target: dir }
      if (yield* holdsNothing(collector, stateDir, dir)) yield* act(collector, item, removePath(dir))
      else
        yield* keep(
          collector,
          item,
          "not a registered git worktree (a folder copy or a crash leftover); remove it by hand"
        )
    }
    const keptAgents = new Set(collector.kept.map((kept) => path.basename(kept.target)))
    for (const entry of yield* listDir(path.join(stateDir, "agents", runId))) {
      if (keptAgents.has(entry.name)) continue
      if (!collector.dryRun) yield* removePath(path.join(stateDir, "agents", runId, entry.name)).pipe(Effect.ignore)
    }
    if (!collector.dryRun) {
      for (const dir of [runDir, path.join(stateDir, "agents", runId)]) {
        if ((yield* listDir(dir)).length === 0) yield* removePath(dir).pipe(Effect.ignore)
      }
    }
  })

/**
 * What a dead run's overlay folder holds beyond its kept workspaces: the agent folders of the others
 * and the snapshots no kept workspace starts from (all of them kept when a kept one's base is unknown;
 * a snapshot the dead run was still writing always goes).
 */
const pruneOverlay = (stateDir: string, collector: Collector, runId: string, keptAgents: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const runDir = runDirOf(stateDir, runId)
    const remove = (dir: string) => act(collector, { kind: "overlay", target: dir }, removePath(dir))
    for (const entry of yield* listDir(path.join(runDir, "agents"))) {
      if (!keptAgents.includes(entry.name)) yield* remove(path.join(runDir, "agents", entry.name))
    }
    const agents = yield* overlayAgents(collector, stateDir, runId)
    const bases = keptAgents.map((agentId) => agents.get(agentId))
    if (bases.includes(undefined)) return
    for (const entry of yield* listDir(path.join(runDir, "snapshots"))) {
      const unused = entry.name.includes(".tmp-") || !bases.includes(entry.name.replace(/\.index$/, ""))
      if (unused) yield* remove(path.join(runDir, "snapshots", entry.name))
    }
  })

/**
 * A dead run's overlay folder (snapshots and upper folders): removed unless a kept worktree of the
 * run is an overlay workspace, whose upper folder and snapshot hold its work; then only the rest of
 * it goes (see {@link pruneOverlay}).
 */
const collectOverlay = (stateDir: string, collector: Collector, runId: string) =>
  Effect.gen(function* () {
    const runDir = runDirOf(stateDir, runId)
    if (!(yield* exists(runDir))) return
    const item: GcItem = { kind: "overlay", target: runDir }
    const keptAgents = collector.kept
      .filter(
        (kept) =>
          (kept.kind === "worktree" && path.dirname(kept.target) === path.join(stateDir, "worktrees", runId)) ||
          (kept.kind === "overlay" && path.dirname(kept.target) === path.join(runDir, "agents"))
      )
      .map((kept) => path.basename(kept.target))
      .filter((agentId) => fsSync.existsSync(path.join(runDir, "agents", agentId)))
    if (keptAgents.length > 0) {
      yield* keep(collector, item, "a kept overlay workspace of the run still uses it")
      return yield* pruneOverlay(stateDir, collector, runId, keptAgents)
    }
    yield* act(collector, item, removePath(runDir))
    if (!collector.dryRun) yield* Effect.promise(() => fs.rmdir(path.dirname(runDir)).catch(() => undefined))
  })

/**
 * From the lease's last heartbeat; without a lease, from the newest of the run's records, its worktrees
 * folder and its end in `endedAt`.
 */
const runAge = (
  registry: string,
  stateDir: string,
  runId: string,
  lease: LeaseFile | undefined,
  endedAt: number | undefined,
  now: number
) =>
  lease !== undefined
    ? Effect.succeed(now - lease.heartbeatAt)
    : Effect.map(
        Effect.forEach([recordsPath(registry, runId), path.join(stateDir, "worktrees", runId)], modifiedAt),
        (times) => now - Math.max(...times, endedAt ?? Number.NEGATIVE_INFINITY)
      )

const modifiedAt = (file: string) =>
  attempt("inspect", file, () =>
    fs.stat(file).then(
      (info) => info.mtimeMs,
      () => Number.NEGATIVE_INFINITY
    )
  )

/** `olderThan` in milliseconds, or a defect naming it. */
const minAgeOf = (olderThan: GcOptions["olderThan"]): Effect.Effect<number> => {
  const ms = DurationOption.millis(olderThan ?? 0)
  return Result.isFailure(ms)
    ? Effect.die(new InvalidOption({ module: "Workspace.gc", option: "olderThan", reason: ms.failure }))
    : Effect.succeed(ms.success)
}

const deadRuns = (
  config: Config,
  minAge: number,
  registry: string,
  stateDir: string,
  candidates: ReadonlySet<string>,
  endedAt: ReadonlyMap<string, number>
) =>
  Effect.gen(function* () {
    const leases = yield* readLeases(registry)
    const now = yield* Clock.currentTimeMillis
    const dead = new Set<string>()
    for (const runId of new Set([...candidates, ...leases.keys()])) {
      const lease = leases.get(runId)
      if (isLeaseAlive(lease, now, config.staleAfter)) continue
      const age = yield* runAge(registry, stateDir, runId, lease, endedAt.get(runId), now)
      if (age >= minAge) dead.add(runId)
    }
    return { dead, leases }
  })

export const collectGarbage = (
  config: Config,
  locks: RepoLocks,
  options: GcOptions
): Effect.Effect<GcReport, WorkspaceError> =>
  Effect.gen(function* () {
    const minAge = yield* minAgeOf(options.olderThan)
    const repo = yield* resolveRepo(options.repo)
    const registry = path.join(repo.commonDir, "corral")
    const stateDir = path.resolve(options.stateDir ?? path.join(repo.root, ".corral"))
    const records = yield* Effect.forEach(yield* listRecordedRuns(registry), (runId) => readRecords(registry, runId))
    const runOfPath = new Map(records.flatMap((r) => r.worktrees.map((dir) => [dir, r.runId] as const)))
    const runOfRecordedBranch = new Map(records.flatMap((r) => r.branches.map((b) => [b, r.runId] as const)))
    const collector: Collector = {
      removed: [],
      kept: [],
      dryRun: options.dryRun ?? false,
      keptBranches: new Set(),
      copies: new Set(records.flatMap((r) => r.copies)),
      overlays: new Map()
    }
    const underState = (dir: string) => dir.startsWith(path.join(stateDir, "worktrees") + path.sep)
    const worktrees = (yield* listWorktrees(repo.root)).filter(
      (entry) => runOfPath.has(entry.path) || underState(entry.path)
    )
    const branches = (yield* listCorralBranches(repo.root)).filter((branch) => runOfRecordedBranch.has(branch))
    const dirs = [
      ...(yield* listDir(path.join(stateDir, "worktrees"))).map((entry) => entry.name),
      ...(yield* listDir(path.join(stateDir, "overlay"))).map((entry) => entry.name)
    ]
    const candidates = new Set([...records.map((r) => r.runId), ...dirs])
    const { dead, leases } = yield* deadRuns(
      config,
      minAge,
      registry,
      stateDir,
      candidates,
      options.endedAt ?? new Map()
    )
    const runOfWorktree = (entry: WorktreeEntry) => runOfPath.get(entry.path) ?? path.basename(path.dirname(entry.path))
    const disposable = new Set(records.filter((r) => r.disposable).map((r) => r.runId))
    for (const entry of worktrees.filter((entry) => dead.has(runOfWorktree(entry)))) {
      yield* collectWorktree(repo, locks, collector, entry, disposable.has(runOfWorktree(entry)), stateDir)
    }
    if (!collector.dryRun) yield* git(["worktree", "prune"], { cwd: repo.root })
    const deadBranches = branches.filter((branch) => dead.has(runOfRecordedBranch.get(branch)!))
    const ordered = [
      ...deadBranches.filter((b) => !b.endsWith(`/${integrationName}`)),
      ...deadBranches.filter((b) => b.endsWith(`/${integrationName}`))
    ]
    for (const branch of ordered) {
      yield* collectBranch(repo, locks, collector, branch, branches, disposable.has(runOfRecordedBranch.get(branch)!))
    }
    const registered = new Set(worktrees.map((entry) => entry.path))
    for (const runId of dead) {
      yield* keepUnlistedOverlays(stateDir, collector, runId, registered)
      yield* collectLeftoverDirs(stateDir, collector, runId, registered)
      yield* collectOverlay(stateDir, collector, runId)
      if (leases.has(runId)) {
        yield* act(
          collector,
          { kind: "lease", target: leasePath(registry, runId) },
          removePath(leasePath(registry, runId))
        )
      }
      const own = records.find((r) => r.runId === runId)
      const keptAny = collector.kept.some(
        (item) =>
          own?.branches.includes(item.target) ||
          own?.worktrees.includes(item.target) ||
          item.target.startsWith(runDirOf(stateDir, runId) + path.sep)
      )
      if (own !== undefined && !keptAny && !collector.dryRun) yield* removeRecords(registry, runId).pipe(Effect.ignore)
    }
    return { removed: collector.removed, kept: collector.kept }
  })
