import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { AcquireOptions, ReleaseReport, Strategy, WorkspaceHandle } from "../Workspace.ts"
import { git, retryLockedWith } from "./git.ts"
import {
  type AgentDirs,
  type PortBlock,
  agentDirs,
  agentEnv,
  lockfileHash,
  makeAgentDirs,
  namespaceOf
} from "./workspaceEnv.ts"
import { BranchAlreadyExists, WorkspaceIoError, type WorkspaceError } from "./workspaceErrors.ts"
import { copyFile, copyTree, exists, removePath, stampTree } from "./workspaceFs.ts"
import {
  agentBranch,
  branchExists,
  excludeStateDir,
  integrationBranch,
  isAncestor,
  type RepoInfo,
  type RepoLocks,
  resolveCommit,
  resolveRepo,
  userCheckoutDirty,
  validateId,
  worktreeDirty
} from "./workspaceRepo.ts"

export interface AcquireDeps {
  readonly locks: RepoLocks
  readonly ports: (agentId: string) => Effect.Effect<PortBlock, WorkspaceError, Scope.Scope>
}

interface Placement {
  readonly root: string
  readonly stateDir: string
  readonly dir: string
  readonly branch: string | undefined
  readonly baseCommit: string | undefined
  readonly warnings: ReadonlyArray<string>
  readonly copied: Array<string>
}

type Outcome = Omit<ReleaseReport, "agentId" | "dir">
type Release = Effect.Effect<Outcome>
type Finish = (outcome: Outcome) => Effect.Effect<void>

const workspaceDir = (stateDir: string, runId: string, agentId: string) =>
  path.join(stateDir, "worktrees", runId, agentId)

const stateDirOf = (options: AcquireOptions, root: string) =>
  path.resolve(options.stateDir ?? path.join(root, ".corral"))

const dirtyChecks = new Map<string, { readonly at: number; readonly dirty: boolean }>()
const DIRTY_CHECK_TTL_MS = 5_000

const checkoutDirty = (root: string) =>
  Effect.suspend(() => {
    const cached = dirtyChecks.get(root)
    if (cached !== undefined && Date.now() - cached.at < DIRTY_CHECK_TTL_MS) return Effect.succeed(cached.dirty)
    return Effect.tap(userCheckoutDirty(root), (dirty) =>
      Effect.sync(() => dirtyChecks.set(root, { at: Date.now(), dirty }))
    )
  })

const dirtyWarning = (repo: RepoInfo) =>
  checkoutDirty(repo.root).pipe(
    Effect.map((dirty) =>
      dirty
        ? [`${repo.root} has uncommitted changes; workspaces start from commit ${repo.head} and do not include them`]
        : []
    )
  )

const addWorktree = (repo: RepoInfo, options: AcquireOptions, placement: Placement) =>
  Effect.gen(function* () {
    const branch = placement.branch!
    yield* excludeStateDir(repo, placement.stateDir)
    if (yield* branchExists(repo.root, branch)) {
      return yield* new BranchAlreadyExists({ repo: repo.root, branch, agentId: options.agentId })
    }
    if (yield* exists(placement.dir)) {
      const cause = new Error("the folder already exists; run gc or pick another run id")
      return yield* new WorkspaceIoError({ path: placement.dir, operation: "create worktree at", cause })
    }
    const sparse = options.sparse !== undefined && options.sparse.length > 0 ? ["--no-checkout"] : []
    const add = git(["worktree", "add", "--quiet", ...sparse, "-b", branch, placement.dir, placement.baseCommit!], {
      cwd: repo.root,
      retryOnLock: false
    })
    const undo = undoPartialAdd(repo, placement.dir, branch)
    const verified = Effect.flatMap(add, () =>
      Effect.flatMap(exists(path.join(placement.dir, ".git")), (ok) =>
        ok ? Effect.void : Effect.andThen(undo, Effect.fail(incompleteWorktree(placement.dir)))
      )
    )
    yield* retryLockedWith(verified, undo).pipe(
      Effect.retry({ times: 3, while: (error) => error instanceof IncompleteWorktree })
    )
  })

class IncompleteWorktree extends WorkspaceIoError {}

const incompleteWorktree = (dir: string) =>
  new IncompleteWorktree({ path: dir, operation: "create worktree at", cause: new Error("git left no .git file") })

const undoPartialAdd = (repo: RepoInfo, dir: string, branch: string) =>
  Effect.gen(function* () {
    yield* removePath(dir)
    yield* git(["worktree", "prune"], { cwd: repo.root })
    if (yield* branchExists(repo.root, branch)) yield* git(["branch", "-D", "--quiet", branch], { cwd: repo.root })
  }).pipe(Effect.ignore)

const applySparse = (dir: string, sparse: ReadonlyArray<string> | undefined) =>
  sparse === undefined || sparse.length === 0
    ? Effect.void
    : git(["sparse-checkout", "set", "--cone", ...sparse], { cwd: dir }).pipe(
        Effect.andThen(git(["checkout", "--quiet"], { cwd: dir })),
        Effect.asVoid
      )

const branchIsSafeToDelete = (root: string, runId: string, branch: string, base: string) =>
  Effect.gen(function* () {
    if (yield* isAncestor(root, branch, base)) return true
    const integration = integrationBranch(runId)
    return (yield* branchExists(root, integration)) && (yield* isAncestor(root, branch, integration))
  })

const removeUnchangedCopies = (root: string, dir: string, copied: ReadonlyArray<string>) =>
  Effect.forEach(copied, (file) =>
    Effect.promise(async () => {
      const [source, copy] = await Promise.all([fs.readFile(path.join(root, file)), fs.readFile(path.join(dir, file))])
      if (source.equals(copy)) await fs.rm(path.join(dir, file), { force: true })
    }).pipe(Effect.catchDefect(() => Effect.void))
  )

const releaseWorktree = (deps: AcquireDeps, repo: RepoInfo, runId: string, placement: Placement): Release =>
  Effect.gen(function* () {
    const branch = placement.branch!
    const present = yield* exists(placement.dir)
    if (present) yield* removeUnchangedCopies(placement.root, placement.dir, placement.copied)
    if (present && (yield* worktreeDirty(placement.dir))) {
      return { workspace: "kept", branch: "kept", reasons: ["the worktree has uncommitted changes"] } as const
    }
    const lock = deps.locks(repo.commonDir)
    const removal = present
      ? git(["worktree", "remove", "--force", placement.dir], { cwd: repo.root })
      : git(["worktree", "prune"], { cwd: repo.root })
    yield* lock.withPermit(removal)
    if (!(yield* branchIsSafeToDelete(repo.root, runId, branch, placement.baseCommit!))) {
      return { workspace: "removed", branch: "kept", reasons: [`${branch} has commits that are not merged`] } as const
    }
    yield* lock.withPermit(git(["branch", "-D", "--quiet", branch], { cwd: repo.root }))
    return { workspace: "removed", branch: "deleted", reasons: [] } as const
  }).pipe(
    Effect.catch((error) =>
      Effect.succeed({ workspace: "kept", branch: "kept", reasons: [`cleanup failed: ${error.message}`] } as const)
    )
  )

const keptByRequest = (branch: "kept" | "none") =>
  Effect.succeed({ workspace: "kept", branch, reasons: ["kept on request (--keep-workspaces)"] } as const)

const releaseCopy = (dir: string, before: { readonly files: number; readonly newestMtimeMs: number }): Release =>
  Effect.gen(function* () {
    const after = yield* stampTree(dir)
    if (after.files !== before.files || after.newestMtimeMs > before.newestMtimeMs) {
      return { workspace: "kept", branch: "none", reasons: ["the folder copy has changes"] } as const
    }
    yield* removePath(dir)
    return { workspace: "removed", branch: "none", reasons: [] } as const
  }).pipe(
    Effect.catch((error) =>
      Effect.succeed({ workspace: "kept", branch: "none", reasons: [`cleanup failed: ${error.message}`] } as const)
    )
  )

const placeWorktree = (deps: AcquireDeps, options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const repo = yield* resolveRepo(options.repo)
    const stateDir = stateDirOf(options, repo.root)
    const placement: Placement = {
      root: repo.root,
      stateDir,
      dir: workspaceDir(stateDir, options.runId, options.agentId),
      branch: agentBranch(options.runId, options.agentId),
      baseCommit: yield* resolveCommit(repo, options.base ?? "HEAD"),
      warnings: yield* dirtyWarning(repo),
      copied: []
    }
    yield* Effect.acquireRelease(deps.locks(repo.commonDir).withPermit(addWorktree(repo, options, placement)), () =>
      (options.keep === true ? keptByRequest("kept") : releaseWorktree(deps, repo, options.runId, placement)).pipe(
        Effect.flatMap(finish)
      )
    )
    yield* applySparse(placement.dir, options.sparse)
    const copies = yield* copyDeclaredFiles(repo.root, placement.dir, options.copyFiles)
    placement.copied.push(...copies.copied)
    return { ...placement, warnings: [...placement.warnings, ...copies.warnings] }
  })

const placeCopy = (options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const root = path.resolve(options.repo)
    const stateDir = stateDirOf(options, root)
    const dir = workspaceDir(stateDir, options.runId, options.agentId)
    const skip = path.dirname(stateDir) === root ? [path.basename(stateDir)] : []
    yield* Effect.acquireRelease(copyTree(root, dir, skip).pipe(Effect.andThen(stampTree(dir))), (before) =>
      (options.keep === true ? keptByRequest("none") : releaseCopy(dir, before)).pipe(Effect.flatMap(finish))
    )
    const placement: Placement = {
      root,
      stateDir,
      dir,
      branch: undefined,
      baseCommit: undefined,
      warnings: [],
      copied: []
    }
    return placement
  })

const placeShared = (options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const root = path.resolve(options.repo)
    yield* Effect.addFinalizer(() => finish({ workspace: "shared", branch: "none", reasons: [] }))
    const placement: Placement = {
      root,
      stateDir: stateDirOf(options, root),
      dir: root,
      branch: undefined,
      baseCommit: undefined,
      warnings: [],
      copied: []
    }
    return placement
  })

const copyDeclaredFile = (root: string, dir: string, file: string) =>
  Effect.gen(function* () {
    const from = path.resolve(root, file)
    const relative = path.relative(root, from)
    if (relative.startsWith("..")) return { warning: `copyFiles: ${file} is outside ${root}; skipped` }
    if (!(yield* exists(from))) return { warning: `copyFiles: ${file} does not exist in ${root}; skipped` }
    if (yield* exists(path.join(dir, relative))) return { warning: `copyFiles: ${file} is tracked by git; skipped` }
    yield* copyFile(from, path.join(dir, relative))
    return { copied: relative }
  })

const copyDeclaredFiles = (root: string, dir: string, files: ReadonlyArray<string> | undefined) =>
  Effect.forEach(files ?? [], (file) => copyDeclaredFile(root, dir, file)).pipe(
    Effect.map((results) => ({
      warnings: results.flatMap((r) => ("warning" in r ? [r.warning] : [])),
      copied: results.flatMap((r) => ("copied" in r ? [r.copied] : []))
    }))
  )

const reportRelease = (options: AcquireOptions, dir: string, outcome: Outcome) =>
  Effect.gen(function* () {
    const report: ReleaseReport = { agentId: options.agentId, dir, ...outcome }
    if (outcome.workspace === "kept" || outcome.branch === "kept") {
      yield* Effect.logWarning(`corral kept the workspace of agent ${options.agentId}: ${outcome.reasons.join("; ")}`)
    }
    if (options.onRelease !== undefined) yield* options.onRelease(report)
  })

const place = (deps: AcquireDeps, options: AcquireOptions, strategy: Strategy, finish: Finish) =>
  strategy === "worktree"
    ? placeWorktree(deps, options, finish)
    : strategy === "directory"
      ? placeCopy(options, finish)
      : placeShared(options, finish)

/**
 * Removes `dir` only if it is empty, in one `rmdir`: a check-then-remove would race with another
 * agent's worktree being created in it and delete that live worktree.
 */
const removeEmptyParent = (dir: string) => Effect.promise(() => fs.rmdir(dir).catch(() => undefined))

const cleanupPrivateDirs = (dirs: AgentDirs | undefined, outcome: Outcome) =>
  dirs === undefined
    ? Effect.void
    : removePath(outcome.workspace === "kept" ? dirs.tmpDir : dirs.agentDir).pipe(
        Effect.ignore,
        Effect.andThen(removeEmptyParent(path.dirname(dirs.agentDir)))
      )

export const acquireWorkspace = (
  deps: AcquireDeps,
  options: AcquireOptions
): Effect.Effect<WorkspaceHandle, WorkspaceError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* validateId("runId", options.runId)
    yield* validateId("agentId", options.agentId)
    const strategy = options.strategy ?? "worktree"
    const created: { dirs?: AgentDirs | undefined; dir?: string | undefined } = {}
    const finish: Finish = (outcome) =>
      cleanupPrivateDirs(created.dirs, outcome).pipe(
        Effect.andThen(created.dir === undefined ? Effect.void : removeEmptyParent(path.dirname(created.dir))),
        Effect.andThen(reportRelease(options, created.dir ?? options.repo, outcome))
      )
    const placement = yield* place(deps, options, strategy, finish)
    created.dir = strategy === "none" ? undefined : placement.dir
    const namespace = namespaceOf({ lockHash: yield* lockfileHash(placement.dir), agentId: options.agentId })
    const dirs = agentDirs(placement.stateDir, options.runId, options.agentId, namespace)
    created.dirs = dirs
    yield* makeAgentDirs(dirs)
    const ports = yield* deps.ports(options.agentId)
    const env = agentEnv({
      dirs,
      ports,
      namespace,
      runId: options.runId,
      agentId: options.agentId,
      workspaceDir: placement.dir
    })
    return {
      repo: placement.root,
      runId: options.runId,
      agentId: options.agentId,
      strategy,
      dir: placement.dir,
      branch: placement.branch,
      baseCommit: placement.baseCommit,
      namespace,
      ports,
      env,
      copiedFiles: placement.copied,
      warnings: placement.warnings
    }
  })
