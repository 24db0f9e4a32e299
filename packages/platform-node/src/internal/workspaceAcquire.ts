import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type { AcquireOptions, ReleaseReport, Strategy, WorkspaceHandle } from "../Workspace.ts"
import { GitError, git, retryLockedWith } from "./git.ts"
import {
  type AgentDirs,
  type PortBlock,
  agentDirs,
  agentEnv,
  lockfileHash,
  makeAgentDirs,
  namespaceOf
} from "./workspaceEnv.ts"
import {
  BranchAlreadyExists,
  NotAGitRepository,
  UnsupportedStrategy,
  WorkspaceIoError,
  type WorkspaceError
} from "./workspaceErrors.ts"
import { attempt, copyFile, copyTree, exists, removePath, stampTree } from "./workspaceFs.ts"
import { appendRecord } from "./runRegistry.ts"
import {
  baseFile,
  indexOf,
  layersOf,
  overlayDirty,
  type OverlayLayers,
  releaseSnapshot,
  requireOverlay,
  useSnapshot
} from "./workspaceOverlay.ts"
import { forgetCommit } from "./overlayCommitted.ts"
import { removeTrees } from "./treeCommands.ts"
import { enableWorktreeConfig, isSparse, normalizeFolders, setCone, widen } from "./workspaceSparse.ts"
import * as Folder from "../Folder.ts"
import {
  awaitPooled,
  type CheckedOut,
  closeRun,
  drainPooled,
  markCommitting,
  markPending,
  type Pooled,
  type Pools,
  poolKey,
  putPooled,
  type Retired,
  reclaim,
  releasing,
  retire,
  runClosed,
  settleMerged,
  takeHolding,
  takePooled,
  takeRetired,
  unmarkCommitting,
  unmarkPending
} from "./workspacePool.ts"
import {
  agentBranch,
  branchExists,
  excludeStateDir,
  integrationBranch,
  isAncestor,
  type RepoInfo,
  type RepoLocks,
  locateRepo,
  resolveCommit,
  takeMergedTip,
  userCheckoutDirty,
  validateId,
  worktreeGitDir,
  worktreeState
} from "./workspaceRepo.ts"

/** Runs an agent's last use of its folder, then lends its worktree to the pool (see `recycleAfter`). */
type Lender = <A, E, R>(lastUse: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

export interface AcquireDeps {
  readonly locks: RepoLocks
  readonly pools: Pools
  readonly ports: (agentId: string) => Effect.Effect<PortBlock, WorkspaceError, Scope.Scope>
  /** The lender of each recyclable workspace handed out. */
  readonly lenders: WeakMap<WorkspaceHandle, Lender>
}

interface Placement {
  readonly root: string
  readonly registry: string
  readonly stateDir: string
  readonly dir: string
  readonly branch: string | undefined
  readonly baseCommit: string | undefined
  readonly warnings: ReadonlyArray<string>
  readonly copied: Array<string>
  /** Set once the workspace is ready for the agent; a release before that rolls the set-up back. */
  ready: boolean
  /**
   * The lend under way or done (`recycleAfter`): the worktree went to the pool with the agent's branch
   * checked out (`CheckedOut`), or stayed (`undefined`: dirty or gone, released as usual).
   */
  lent: Fiber.Fiber<CheckedOut | undefined> | undefined
  /** How the agent's handle lends the worktree, when it is recyclable. */
  readonly lender?: Lender | undefined
  /** An overlay workspace's layers; `held` while it counts as a user of its snapshot. */
  overlay?: { readonly layers: OverlayLayers; readonly unshare: string; held: boolean } | undefined
}

type Outcome = Omit<ReleaseReport, "agentId" | "dir">
type Release = Effect.Effect<Outcome>
type Finish = (outcome: Outcome, dir: string) => Effect.Effect<void>

const workspaceDir = (stateDir: string, runId: string, agentId: string) =>
  path.join(stateDir, "worktrees", runId, agentId)

/** The name of the workspace's folder, branch, private folders and overlay layers. */
const folderOf = (options: AcquireOptions) => options.folder ?? options.agentId

const stateDirOf = (options: AcquireOptions, root: string) =>
  path.resolve(options.stateDir ?? path.join(root, ".corral"))

/** A full commit id (what `Integration.head` returns) needs no `rev-parse`: `worktree add` checks it. */
const fullCommitId = /^[0-9a-f]{40}$/

const dirtyChecks = new Map<string, { readonly at: number; readonly dirty: Effect.Effect<boolean, WorkspaceError> }>()
const DIRTY_CHECK_TTL_MS = 5_000

/** Whether the user's checkout has changes: one `git status` per 5 s, shared by agents starting together. */
const checkoutDirty = (root: string) =>
  Effect.suspend(() => {
    const cached = dirtyChecks.get(root)
    if (cached !== undefined && Date.now() - cached.at < DIRTY_CHECK_TTL_MS) return cached.dirty
    return Effect.flatMap(Effect.cached(userCheckoutDirty(root)), (dirty) => {
      const entry = { at: Date.now(), dirty }
      dirtyChecks.set(root, entry)
      return Effect.tapError(dirty, () =>
        Effect.sync(() => {
          if (dirtyChecks.get(root) === entry) dirtyChecks.delete(root)
        })
      )
    })
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
    if (yield* exists(placement.dir)) {
      const cause = new Error("the folder already exists; run gc or pick another run id")
      return yield* new WorkspaceIoError({ path: placement.dir, operation: "create worktree at", cause })
    }
    if (yield* branchExists(repo.root, branch)) {
      return yield* new BranchAlreadyExists({ repo: repo.root, branch, agentId: options.agentId })
    }
    yield* appendRecord(placement.registry, options.runId, { branch })
    yield* appendRecord(placement.registry, options.runId, { worktree: placement.dir })
    const add = git(
      ["worktree", "add", "--quiet", "--no-checkout", "-b", branch, "--", placement.dir, placement.baseCommit!],
      {
        cwd: repo.root,
        retryOnLock: false
      }
    )
    const undo = undoFailedAdd(repo, placement.dir, branch)
    const verified = Effect.flatMap(add, () =>
      Effect.flatMap(exists(path.join(placement.dir, ".git")), (ok) =>
        ok ? Effect.void : Effect.andThen(undo, Effect.fail(incompleteWorktree(placement.dir)))
      )
    )
    const branchTaken = (error: unknown) => error instanceof GitError && branchTakenPattern.test(error.stderr)
    yield* retryLockedWith(verified, undo, (error) => !branchTaken(error)).pipe(
      Effect.mapError((error) =>
        error instanceof GitError && prunedMidAddPattern.test(error.stderr) ? prunedMidAdd(placement.dir, error) : error
      ),
      Effect.onInterrupt(() => undo),
      Effect.retry({ times: 3, while: (error) => error instanceof IncompleteWorktree }),
      Effect.catchTag(
        "GitError",
        (error): Effect.Effect<never, WorkspaceError> =>
          branchTaken(error)
            ? Effect.fail(new BranchAlreadyExists({ repo: repo.root, branch, agentId: options.agentId }))
            : Effect.fail(error)
      )
    )
  })

const branchTakenPattern = /a branch named .* already exists/

/**
 * What `worktree add` prints when another process's `git worktree prune` deleted the new worktree's
 * administrative folder before git wrote its `locked` file (or between prune's two checks, before
 * the `gitdir` file): a later write, or the child that sets `HEAD`, finds the folder gone. 26 of
 * 1,000 adds beside a prune without end (`test/stress/gitRaces.ts prune 1000`).
 */
const prunedMidAddPattern =
  /could not open '[^']*worktrees\/[^'/]+\/[^']+' for writing: No such file or directory|not a git repository: \S*\/worktrees\//

const prunedMidAdd = (dir: string, error: GitError) =>
  new IncompleteWorktree({
    path: dir,
    operation: "create worktree at",
    cause: new Error(
      `another process's git worktree prune deleted its administrative folder while git created it: ${error.stderr.trim()}`
    )
  })

const recyclable = (options: AcquireOptions) =>
  options.recycle === true && options.disposable !== true && options.overlay !== true

const sparseOf = (options: AcquireOptions) =>
  options.overlay === true || options.sparse === undefined || options.sparse.length === 0 ? undefined : options.sparse

/**
 * The checkout of the agent's branch at its base in a pooled worktree, with the agent's cone: a
 * sparse agent's cone is written first (the checkout applies it, removing the previous agent's
 * folders and writing the new ones), and a full agent in a sparse worktree gets every file back.
 */
const checkOutReused = (dir: string, branch: string, base: string, sparse: ReadonlyArray<string> | undefined) =>
  Effect.gen(function* () {
    const checkout = git(["checkout", "--quiet", "--force", "-b", branch, base, "--"], { cwd: dir })
    if (sparse !== undefined) {
      yield* setCone(dir, sparse)
      return yield* checkout
    }
    if (!(yield* isSparse(dir))) return yield* checkout
    const narrowOff = yield* widen(dir)
    yield* checkout
    yield* narrowOff
  })

/**
 * Moves a pooled worktree to the agent's folder and checks out the agent's branch at its base; the
 * merged branch of its previous agent, no longer checked out, is retired.
 */
const reuseWorktree = (
  deps: AcquireDeps,
  repo: RepoInfo,
  options: AcquireOptions,
  placement: Placement,
  pooled: Pooled
) =>
  Effect.gen(function* () {
    const branch = placement.branch!
    const key = poolKey(repo.commonDir, options.runId)
    if (yield* branchExists(repo.root, branch)) {
      if (!putPooled(deps.pools, key, pooled)) yield* discardPooled(deps, options.runId, pooled)
      return yield* new BranchAlreadyExists({ repo: repo.root, branch, agentId: options.agentId })
    }
    yield* appendRecord(placement.registry, options.runId, { branch })
    yield* appendRecord(placement.registry, options.runId, { worktree: placement.dir })
    const undo = undoPartialAdd(repo, placement.dir, branch)
    yield* git(["worktree", "move", "--", pooled.dir, placement.dir], { cwd: repo.root }).pipe(
      Effect.andThen(
        checkOutReused(placement.dir, branch, placement.baseCommit!, sparseOf(options)).pipe(
          Effect.tapError(() => undo)
        )
      ),
      Effect.onInterrupt(() => undo)
    )
    retire(deps.pools, key, pooled)
  })

/** Removes a worktree taken out of the pool (the caller holds the repository lock where it must). */
const discardPooled = (deps: Pick<AcquireDeps, "pools">, runId: string, pooled: Pooled) =>
  git(["worktree", "remove", "--force", "--", pooled.dir], { cwd: pooled.root }).pipe(
    Effect.catch(() => removePath(pooled.dir).pipe(Effect.andThen(git(["worktree", "prune"], { cwd: pooled.root })))),
    Effect.andThen(Effect.sync(() => retire(deps.pools, poolKey(pooled.commonDir, runId), pooled))),
    Effect.ignore
  )

/**
 * Deletes merged branches that no worktree has checked out, in one ref transaction, each only while
 * it still points at its merged tip; when the transaction fails (a branch moved), one at a time, and
 * a branch that moved is kept.
 */
const deleteRetired = (root: string, retired: ReadonlyArray<Retired>) => {
  if (retired.length === 0) return Effect.void
  const input = retired.map(({ branch, tip }) => `delete refs/heads/${branch} ${tip}\n`).join("")
  return git(["update-ref", "-m", "corral: merged", "--stdin"], { cwd: root, input }).pipe(
    Effect.catch(() =>
      Effect.forEach(
        retired,
        ({ branch, tip }) =>
          git(["update-ref", "-d", "--", `refs/heads/${branch}`, tip], { cwd: root }).pipe(
            Effect.catch(() => Effect.logWarning(`corral kept ${branch}: it moved after its work was merged`))
          ),
        { discard: true }
      )
    ),
    Effect.ignore
  )
}

/**
 * Deletes the agent's own branch when it is a merged branch of an earlier attempt still waiting for
 * deletion (see `workspacePool.ts`); a pooled worktree that has it checked out is detached first.
 */
const reclaimBranch = (
  deps: AcquireDeps,
  repo: RepoInfo,
  runId: string,
  branch: string,
  { pooled, retired }: ReturnType<typeof reclaim>
) =>
  Effect.gen(function* () {
    const key = poolKey(repo.commonDir, runId)
    if (retired !== undefined) yield* deleteIfAt(repo, retired.branch, retired.tip)
    if (pooled?.checkedOut === undefined) return
    const detached = yield* git(["update-ref", "--no-deref", "-m", "corral: recycle", "HEAD", "HEAD"], {
      cwd: pooled.dir
    }).pipe(
      Effect.as(true),
      Effect.catch(() => Effect.succeed(false))
    )
    if (detached) yield* deleteIfAt(repo, branch, pooled.checkedOut.tip)
    const free = { dir: pooled.dir, root: pooled.root, commonDir: pooled.commonDir }
    if (!detached || !putPooled(deps.pools, key, free)) yield* discardPooled(deps, runId, detached ? free : pooled)
  })

/**
 * How many pooled worktrees of one repository `drainPool` removes at once: each `worktree remove`
 * deletes only its own folder and administrative folder, and no worktree of the run is added any
 * more, so they run side by side under one hold of the repository lock (the user waits for them).
 */
const DRAIN_CONCURRENCY = 4

/** Removes a pooled worktree; its branch, when merged, joins `deletable`. */
const removePooled = (pooled: Pooled, deletable: Array<Retired>) =>
  git(["worktree", "remove", "--force", "--", pooled.dir], { cwd: pooled.root }).pipe(
    Effect.catch(() => removePath(pooled.dir)),
    Effect.andThen(
      Effect.sync(() => {
        const checkedOut = pooled.checkedOut
        if (checkedOut === undefined || checkedOut.left) return
        checkedOut.left = true
        if (checkedOut.state === "merged") {
          deletable.push({ branch: checkedOut.branch, tip: checkedOut.tip, root: pooled.root })
        }
      })
    ),
    Effect.andThen(removeEmptyParent(path.dirname(pooled.dir))),
    Effect.ignore
  )

/**
 * Closes the run's pools (`closeRun`: no agent of the run will take a pooled worktree any more),
 * removes their free worktrees now, side by side, instead of when the run ends, and deletes the
 * merged branches no worktree has checked out.
 */
export const closePool = (deps: Pick<AcquireDeps, "locks" | "pools">, runId: string) =>
  Effect.gen(function* () {
    const free = closeRun(deps.pools, runId)
    yield* Effect.forEach(
      [...new Set(free.map((pooled) => pooled.commonDir))],
      (commonDir) =>
        deps.locks(commonDir).withPermit(
          Effect.forEach(
            free.filter((pooled) => pooled.commonDir === commonDir),
            (pooled) =>
              discardPooled(deps, runId, pooled).pipe(Effect.andThen(removeEmptyParent(path.dirname(pooled.dir)))),
            { concurrency: DRAIN_CONCURRENCY, discard: true }
          )
        ),
      { discard: true }
    )
    yield* deleteRetiredByRoot(takeRetired(deps.pools, runId))
  })

/** Removes the run's pooled worktrees and deletes its retired branches (when the run ends). */
export const drainPool = (deps: Pick<AcquireDeps, "locks" | "pools">, runId: string) =>
  Effect.gen(function* () {
    const { worktrees, retired } = drainPooled(deps.pools, runId)
    const deletable = [...retired]
    const commonDirs = [...new Set(worktrees.map((pooled) => pooled.commonDir))]
    yield* Effect.forEach(
      commonDirs,
      (commonDir) =>
        deps.locks(commonDir).withPermit(
          Effect.forEach(
            worktrees.filter((pooled) => pooled.commonDir === commonDir),
            (pooled) => removePooled(pooled, deletable),
            { concurrency: DRAIN_CONCURRENCY, discard: true }
          )
        ),
      { discard: true }
    )
    yield* deleteRetiredByRoot(deletable)
  })

const deleteRetiredByRoot = (retired: ReadonlyArray<Retired>) =>
  Effect.forEach(
    [...new Set(retired.map((entry) => entry.root))],
    (root) =>
      deleteRetired(
        root,
        retired.filter((entry) => entry.root === root)
      ),
    { discard: true }
  )

class IncompleteWorktree extends WorkspaceIoError {}

const incompleteWorktree = (dir: string) =>
  new IncompleteWorktree({ path: dir, operation: "create worktree at", cause: new Error("git left no .git file") })

const undoPartialAdd = (repo: RepoInfo, dir: string, branch: string) =>
  Effect.gen(function* () {
    yield* removePath(dir)
    yield* removeEmptyParent(path.dirname(dir))
    yield* git(["worktree", "prune"], { cwd: repo.root })
    if (yield* branchExists(repo.root, branch)) yield* git(["branch", "-D", "--quiet", branch], { cwd: repo.root })
  }).pipe(Effect.ignore)

/**
 * Undoes a `worktree add` that failed. An add killed (SIGKILL) after it wrote the worktree's
 * administrative folder leaves it locked ("initializing", which `worktree prune` respects) with a
 * placeholder `HEAD` that makes `rev-list --all` and `fetch` fail in the whole repository: a double
 * `--force` removes a locked worktree (it fails, ignored, where git registered none).
 */
const undoFailedAdd = (repo: RepoInfo, dir: string, branch: string) =>
  git(["worktree", "remove", "--force", "--force", "--", dir], { cwd: repo.root }).pipe(
    Effect.ignore,
    Effect.andThen(undoPartialAdd(repo, dir, branch))
  )

/**
 * Fills a worktree that `worktree add --no-checkout` created, outside the repository lock: the
 * checkout touches only the worktree's own files and index (`read-tree` writes no ref and reads no
 * other worktree), so the first agents' checkouts run side by side instead of one after another.
 * Until its index exists the worktree is an unfinished set-up, which gc removes.
 */
const checkOut = (dir: string, sparse: ReadonlyArray<string> | undefined) =>
  (sparse === undefined ? Effect.void : setCone(dir, sparse)).pipe(
    Effect.andThen(git(["read-tree", "--reset", "-u", "HEAD"], { cwd: dir })),
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

const rollBack = (deps: AcquireDeps, repo: RepoInfo, placement: Placement): Release =>
  deps
    .locks(repo.commonDir)
    .withPermit(undoPartialAdd(repo, placement.dir, placement.branch!))
    .pipe(Effect.as({ workspace: "removed", branch: "deleted", reasons: ["set-up did not finish"] } as const))

/** Deletes `branch` only while it still points at `tip` (one compare-and-swap, no reachability walk). */
const deleteIfAt = (repo: RepoInfo, branch: string, tip: string) =>
  git(["update-ref", "-d", "--", `refs/heads/${branch}`, tip], { cwd: repo.root }).pipe(
    Effect.as(true),
    Effect.catchTag("GitError", () => Effect.succeed(false))
  )

/**
 * Readies a clean worktree for the next agent: detached (`update-ref --no-deref HEAD`, which moves no
 * file and, unlike `checkout --detach`, does not rescan the tree), with no untracked or ignored file left.
 */
const detachAndClean = (dir: string, state: WorktreeState) =>
  git(["update-ref", "--no-deref", "-m", "corral: recycle", "HEAD", "HEAD"], { cwd: dir }).pipe(
    Effect.andThen(cleanUnlessClean(dir, state))
  )

/** Removes every untracked and ignored file, nested repositories included. */
const cleanAll = (dir: string) =>
  git(["clean", "-ffdxq"], { cwd: dir }).pipe(
    Effect.as(true),
    Effect.catch(() => Effect.succeed(false))
  )

type WorktreeState = "clean" | "ignored" | "dirty" | "absent"

/** `git clean` only when the worktree's `status` listed ignored files: a clean one has nothing to remove. */
const cleanUnlessClean = (dir: string, state: WorktreeState) =>
  state === "clean" ? Effect.succeed(true) : cleanAll(dir)

const releaseBranch = (
  deps: AcquireDeps,
  repo: RepoInfo,
  runId: string,
  placement: Placement,
  mergedTip: string | undefined
) =>
  Effect.gen(function* () {
    const branch = placement.branch!
    if (mergedTip !== undefined && (yield* deleteIfAt(repo, branch, mergedTip))) return "deleted" as const
    if (!(yield* branchIsSafeToDelete(repo.root, runId, branch, placement.baseCommit!))) return "kept" as const
    yield* deps.locks(repo.commonDir).withPermit(git(["branch", "-D", "--quiet", branch], { cwd: repo.root }))
    return "deleted" as const
  })

/** The report of a released workspace whose branch `releaseBranch` deleted or kept. */
const branchReleased = (workspace: "recycled" | "removed", branch: string, outcome: "deleted" | "kept"): Outcome =>
  outcome === "deleted"
    ? { workspace, branch: "deleted", reasons: [] }
    : { workspace, branch: "kept", reasons: [`${branch} has commits that are not merged`] }

/** A disposable workspace's release: worktree and branch go, whatever they hold. */
const discardWorktree = (deps: AcquireDeps, repo: RepoInfo, placement: Placement): Release =>
  deps
    .locks(repo.commonDir)
    .withPermit(undoPartialAdd(repo, placement.dir, placement.branch!))
    .pipe(Effect.as({ workspace: "removed", branch: "deleted", reasons: [] } as const))

const releaseWorktree = (
  deps: AcquireDeps,
  repo: RepoInfo,
  runId: string,
  placement: Placement,
  recycleAsked: boolean
): Release =>
  Effect.gen(function* () {
    if (!placement.ready) return yield* rollBack(deps, repo, placement)
    const recycle = recycleAsked && !runClosed(deps.pools, runId)
    const lent = placement.lent === undefined ? undefined : yield* Fiber.join(placement.lent)
    if (lent !== undefined) return yield* settleLent(deps, repo, runId, placement, lent)
    const branch = placement.branch!
    const present = yield* exists(placement.dir)
    if (present) yield* removeUnchangedCopies(placement.root, placement.dir, placement.copied)
    const state: WorktreeState = present ? yield* worktreeState(placement.dir) : "absent"
    if (state === "dirty") {
      return { workspace: "kept", branch: "kept", reasons: ["the worktree has uncommitted changes"] } as const
    }
    const lock = deps.locks(repo.commonDir)
    const mergedTip = takeMergedTip(repo.commonDir, branch)
    const key = poolKey(repo.commonDir, runId)
    if (present && recycle && mergedTip !== undefined && (yield* cleanUnlessClean(placement.dir, state))) {
      const checkedOut: CheckedOut = { branch, tip: mergedTip, state: "merged", left: false, removed: false }
      const pooled: Pooled = { dir: placement.dir, root: repo.root, commonDir: repo.commonDir, checkedOut }
      if (putPooled(deps.pools, key, pooled)) return { workspace: "recycled", branch: "deleted", reasons: [] } as const
      yield* lock.withPermit(discardPooled(deps, runId, pooled))
      return { workspace: "removed", branch: "deleted", reasons: [] } as const
    }
    const recycled = present && recycle && (yield* detachAndClean(placement.dir, state))
    if (!recycled) {
      const removal = present
        ? git(["worktree", "remove", "--force", placement.dir], { cwd: repo.root })
        : git(["worktree", "prune"], { cwd: repo.root })
      yield* lock.withPermit(removal)
    }
    const branchOutcome = yield* releaseBranch(deps, repo, runId, placement, mergedTip)
    const free: Pooled = { dir: placement.dir, root: repo.root, commonDir: repo.commonDir }
    const pooled = recycled && putPooled(deps.pools, key, free)
    if (recycled && !pooled) yield* lock.withPermit(discardPooled(deps, runId, free))
    return branchReleased(pooled ? "recycled" : "removed", branch, branchOutcome)
  }).pipe(
    Effect.catch((error) =>
      Effect.succeed({ workspace: "kept", branch: "kept", reasons: [`cleanup failed: ${error.message}`] } as const)
    )
  )

/**
 * Hands a clean worktree to the run's pool while its agent's work is merging (the merge runs at the
 * repository root): the same check and clean as a release, with the agent's branch still checked out
 * (`merging`). A worktree with uncommitted or untracked changes, or gone, stays with its agent.
 */
const lend = (deps: AcquireDeps, repo: RepoInfo, runId: string, placement: Placement) =>
  Effect.gen(function* () {
    if (!(yield* exists(placement.dir))) return undefined
    yield* removeUnchangedCopies(placement.root, placement.dir, placement.copied)
    const state = yield* worktreeState(placement.dir)
    if (state === "dirty" || !(yield* cleanUnlessClean(placement.dir, state))) return undefined
    const checkedOut: CheckedOut = { branch: placement.branch!, tip: "", state: "merging", left: false, removed: false }
    const key = poolKey(repo.commonDir, runId)
    const pooled: Pooled = { dir: placement.dir, root: repo.root, commonDir: repo.commonDir, checkedOut }
    if (putPooled(deps.pools, key, pooled)) return checkedOut
    yield* deps.locks(repo.commonDir).withPermit(discardPooled(deps, runId, pooled))
    checkedOut.removed = true
    return checkedOut
  }).pipe(Effect.catch(() => Effect.succeed(undefined)))

/**
 * Runs `lastUse` with a lend marked waiting for a commit in the pool (an acquire meanwhile may add a
 * spare worktree, see `awaitPooled`), then, when it succeeded, lends the worktree in the background
 * with a release marked under way (an acquire waits for it) until the lend ends. The workspace's
 * release waits for the lend and settles the branch.
 */
const makeLender =
  (deps: AcquireDeps, repo: RepoInfo, runId: string, placement: Placement, scope: Scope.Scope): Lender =>
  (lastUse) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        if (placement.lent !== undefined) return yield* restore(lastUse)
        const key = poolKey(repo.commonDir, runId)
        markCommitting(deps.pools, key)
        const exit = yield* Effect.exit(restore(lastUse))
        if (Exit.isSuccess(exit) && placement.lent === undefined) {
          markPending(deps.pools, key)
          const lending = lend(deps, repo, runId, placement).pipe(
            Effect.ensuring(Effect.sync(() => unmarkPending(deps.pools, key)))
          )
          placement.lent = yield* Effect.forkIn(lending, scope, { uninterruptible: true })
        }
        unmarkCommitting(deps.pools, key)
        return yield* exit
      })
    )

/**
 * The release of a lent worktree: only the branch is left to settle (see `workspacePool.ts`). A
 * merged branch is retired (deleted when the run ends); any other is detached from its worktree when
 * that is still in the pool, then kept or deleted as in any release.
 */
const settleLent = (
  deps: AcquireDeps,
  repo: RepoInfo,
  runId: string,
  placement: Placement,
  checkedOut: CheckedOut
): Release =>
  Effect.gen(function* () {
    const key = poolKey(repo.commonDir, runId)
    const mergedTip = takeMergedTip(repo.commonDir, checkedOut.branch)
    const workspace = checkedOut.removed ? "removed" : "recycled"
    if (mergedTip !== undefined) {
      settleMerged(deps.pools, key, repo.root, checkedOut, mergedTip)
      return { workspace, branch: "deleted", reasons: [] } as const
    }
    checkedOut.state = "unmerged"
    const holding = takeHolding(deps.pools, key, checkedOut)
    if (holding !== undefined) {
      const detached = yield* git(["update-ref", "--no-deref", "-m", "corral: recycle", "HEAD", "HEAD"], {
        cwd: holding.dir
      }).pipe(
        Effect.as(true),
        Effect.catch(() => Effect.succeed(false))
      )
      checkedOut.left = true
      const free = { dir: holding.dir, root: holding.root, commonDir: holding.commonDir }
      if (!detached || !putPooled(deps.pools, key, free)) yield* discardPooled(deps, runId, detached ? free : holding)
    }
    return branchReleased(workspace, checkedOut.branch, yield* releaseBranch(deps, repo, runId, placement, undefined))
  }).pipe(
    Effect.catch((error) =>
      Effect.succeed({ workspace: "recycled", branch: "kept", reasons: [`cleanup failed: ${error.message}`] } as const)
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

/**
 * Readies an overlay workspace registered by `addWorktree`: the run's snapshot of the base, the
 * agent's empty upper folder holding the worktree's `.git` file, and the index of the base (no stat
 * data: nothing is checked out). Until the index exists the set-up is unfinished, which gc removes.
 */
const setUpOverlay = (options: AcquireOptions, placement: Placement, unshare: string) =>
  Effect.gen(function* () {
    const layers = layersOf(placement.stateDir, options.runId, folderOf(options), placement.baseCommit!)
    const state = { layers, unshare, held: false }
    placement.overlay = state
    yield* attempt("create overlay folders in", path.dirname(layers.upper), async () => {
      Folder.makeSync(layers.upper)
      Folder.makeSync(layers.work)
      await fs.copyFile(path.join(placement.dir, ".git"), path.join(layers.upper, ".git"))
      await fs.writeFile(baseFile(layers), placement.baseCommit!)
    })
    yield* Effect.uninterruptible(
      Effect.tap(useSnapshot(placement.root, placement.stateDir, options.runId, placement.baseCommit!), () =>
        Effect.sync(() => {
          state.held = true
        })
      )
    )
    const gitDir = yield* worktreeGitDir(placement.dir)
    yield* attempt("write the index of", placement.dir, () =>
      fs.copyFile(indexOf(layers.lower), path.join(gitDir!, "index"))
    )
  })

const dropOverlay = (runId: string, placement: Placement) =>
  Effect.suspend(() => {
    const state = placement.overlay
    if (state === undefined) return Effect.void
    const agentDir = path.dirname(state.layers.upper)
    return Effect.andThen(forgetCommit(state.layers.upper), removeTrees(agentDir)).pipe(
      Effect.ignore,
      Effect.andThen(removeEmptyParent(path.dirname(agentDir))),
      Effect.andThen(
        state.held
          ? Effect.andThen(
              Effect.sync(() => {
                state.held = false
              }),
              releaseSnapshot(placement.stateDir, runId, placement.baseCommit!)
            )
          : Effect.void
      )
    )
  })

/** Whether the overlay's upper folder holds changes the agent's branch does not have (ignored files aside). */
const overlayDirtyOf = (placement: Placement) =>
  overlayDirty(placement.overlay!.unshare, placement.overlay!.layers, placement.dir, placement.copied)

/** The release of an overlay workspace: kept with its snapshot when dirty, else every layer removed. */
const releaseOverlay = (deps: AcquireDeps, repo: RepoInfo, runId: string, placement: Placement): Release =>
  Effect.gen(function* () {
    if (!placement.ready) {
      const outcome = yield* rollBack(deps, repo, placement)
      yield* dropOverlay(runId, placement)
      return outcome
    }
    if (yield* overlayDirtyOf(placement)) {
      const upper = placement.overlay!.layers.upper
      return {
        workspace: "kept",
        branch: "kept",
        reasons: [`the overlay workspace has uncommitted changes (in ${upper})`]
      } as const
    }
    yield* dropOverlay(runId, placement)
    yield* deps
      .locks(repo.commonDir)
      .withPermit(git(["worktree", "remove", "--force", placement.dir], { cwd: repo.root }))
    const branchOutcome = yield* releaseBranch(
      deps,
      repo,
      runId,
      placement,
      takeMergedTip(repo.commonDir, placement.branch!)
    )
    return branchReleased("removed", placement.branch!, branchOutcome)
  }).pipe(
    Effect.catch((error) =>
      Effect.succeed({ workspace: "kept", branch: "kept", reasons: [`cleanup failed: ${error.message}`] } as const)
    )
  )

const placeWorktree = (deps: AcquireDeps, options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const located = yield* locateRepo(options.repo)
    const base = options.base ?? "HEAD"
    const baseCommit = fullCommitId.test(base)
      ? base
      : yield* resolveCommit({ ...located, head: base }, base).pipe(
          Effect.catchTag(
            "GitError",
            (error): Effect.Effect<never, WorkspaceError> =>
              base === "HEAD" ? Effect.fail(new NotAGitRepository({ path: located.root })) : Effect.fail(error)
          )
        )
    const repo: RepoInfo = { ...located, head: baseCommit }
    const dirty = yield* Effect.forkChild(dirtyWarning(repo))
    const stateDir = stateDirOf(options, repo.root)
    const placement: Placement = {
      root: repo.root,
      registry: path.join(repo.commonDir, "corral"),
      ready: false,
      stateDir,
      dir: workspaceDir(stateDir, options.runId, folderOf(options)),
      branch: agentBranch(options.runId, folderOf(options)),
      baseCommit,
      warnings: [],
      copied: [],
      lent: undefined
    }
    const key = poolKey(repo.commonDir, options.runId)
    const overlayOn = options.overlay === true
    const unshare = overlayOn
      ? yield* requireOverlay(options.agentId, [
          placement.dir,
          stateDir,
          ...Object.values(layersOf(stateDir, options.runId, folderOf(options), baseCommit))
        ])
      : undefined
    if (options.disposable === true) yield* appendRecord(placement.registry, options.runId, { disposable: true })
    if (recyclable(options)) yield* awaitPooled(deps.pools, key)
    const reclaimed = reclaim(deps.pools, key, placement.branch!)
    if (reclaimed.pooled !== undefined || reclaimed.retired !== undefined) {
      const lock = deps.locks(repo.commonDir)
      yield* lock.withPermit(reclaimBranch(deps, repo, options.runId, placement.branch!, reclaimed))
    }
    const create = Effect.uninterruptibleMask((restore): Effect.Effect<"added" | "reused", WorkspaceError> => {
      const pooled = recyclable(options) ? takePooled(deps.pools, key) : undefined
      const add = restore(Effect.as(addWorktree(repo, options, placement), "added" as const))
      return pooled === undefined
        ? add
        : restore(reuseWorktree(deps, repo, options, placement, pooled)).pipe(
            Effect.onInterrupt(() =>
              discardPooled(deps, options.runId, pooled).pipe(
                Effect.andThen(removeEmptyParent(path.dirname(pooled.dir)))
              )
            ),
            Effect.as("reused" as const),
            Effect.catch((error) =>
              error instanceof BranchAlreadyExists
                ? Effect.fail(error)
                : Effect.andThen(discardPooled(deps, options.runId, pooled), add)
            )
          )
    })
    const sparse = sparseOf(options)
    const sparseReady = sparse === undefined ? Effect.void : enableWorktreeConfig(repo.root, repo.commonDir)
    const created = yield* Effect.acquireRelease(
      deps.locks(repo.commonDir).withPermit(Effect.andThen(sparseReady, create)),
      () =>
        (options.keep === true
          ? keptByRequest("kept")
          : options.disposable === true
            ? Effect.tap(discardWorktree(deps, repo, placement), () => dropOverlay(options.runId, placement))
            : overlayOn
              ? releaseOverlay(deps, repo, options.runId, placement)
              : recyclable(options)
                ? releasing(deps.pools, key, releaseWorktree(deps, repo, options.runId, placement, true))
                : releaseWorktree(deps, repo, options.runId, placement, false)
        ).pipe(Effect.flatMap((outcome) => finish(outcome, placement.dir))),
      { interruptible: true }
    )
    if (unshare !== undefined) yield* setUpOverlay(options, placement, unshare)
    else if (created === "added") yield* checkOut(placement.dir, sparse)
    const copies = yield* copyDeclaredFiles(placement, options.runId, options.copyFiles)
    placement.copied.push(...copies.copied)
    const warnings = yield* Fiber.join(dirty)
    placement.ready = true
    const lender =
      recyclable(options) && options.keep !== true
        ? makeLender(deps, repo, options.runId, placement, yield* Effect.scope)
        : undefined
    return { ...placement, warnings: [...warnings, ...copies.warnings], lender }
  })

const placeCopy = (options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const root = path.resolve(options.repo)
    const stateDir = stateDirOf(options, root)
    const dir = workspaceDir(stateDir, options.runId, folderOf(options))
    const skip = path.dirname(stateDir) === root ? [path.basename(stateDir)] : []
    yield* Effect.acquireRelease(copyTree(root, dir, skip).pipe(Effect.andThen(stampTree(dir))), (before) =>
      (options.keep === true ? keptByRequest("none") : releaseCopy(dir, before)).pipe(
        Effect.flatMap((outcome) => finish(outcome, dir))
      )
    )
    const placement: Placement = {
      root,
      registry: stateDir,
      ready: true,
      stateDir,
      dir,
      branch: undefined,
      baseCommit: undefined,
      warnings: [],
      copied: [],
      lent: undefined
    }
    return placement
  })

const placeShared = (options: AcquireOptions, finish: Finish) =>
  Effect.gen(function* () {
    const root = path.resolve(options.repo)
    yield* Effect.addFinalizer(() => finish({ workspace: "shared", branch: "none", reasons: [] }, root))
    const placement: Placement = {
      root,
      registry: stateDirOf(options, root),
      ready: true,
      stateDir: stateDirOf(options, root),
      dir: root,
      branch: undefined,
      baseCommit: undefined,
      warnings: [],
      copied: [],
      lent: undefined
    }
    return placement
  })

const copyDeclaredFile = (placement: Placement, runId: string, file: string) =>
  Effect.gen(function* () {
    const { root, dir } = placement
    const from = path.resolve(root, file)
    const relative = path.relative(root, from)
    if (relative.startsWith("..")) return { warning: `copyFiles: ${file} is outside ${root}; skipped` }
    if (!(yield* exists(from))) return { warning: `copyFiles: ${file} does not exist in ${root}; skipped` }
    const view = placement.overlay?.layers.lower ?? dir
    if (yield* exists(path.join(view, relative))) return { warning: `copyFiles: ${file} is tracked by git; skipped` }
    yield* appendRecord(placement.registry, runId, { copy: relative, worktree: dir })
    yield* copyFile(from, path.join(placement.overlay?.layers.upper ?? dir, relative))
    return { copied: relative }
  })

const copyDeclaredFiles = (placement: Placement, runId: string, files: ReadonlyArray<string> | undefined) =>
  Effect.forEach(files ?? [], (file) => copyDeclaredFile(placement, runId, file)).pipe(
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
  given: AcquireOptions
): Effect.Effect<WorkspaceHandle, WorkspaceError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* validateId("runId", given.runId)
    yield* validateId("agentId", given.agentId)
    if (given.folder !== undefined) yield* validateId("folder", given.folder)
    const sparse = given.sparse === undefined ? undefined : yield* normalizeFolders(given.agentId, given.sparse)
    const options: AcquireOptions = { ...given, sparse }
    const strategy = options.strategy ?? "worktree"
    if (options.overlay === true && strategy !== "worktree") {
      return yield* new UnsupportedStrategy({
        agentId: options.agentId,
        strategy,
        operation: "set up an overlay workspace"
      })
    }
    const created: { dirs?: AgentDirs | undefined } = {}
    const finish: Finish = (outcome, dir) =>
      cleanupPrivateDirs(created.dirs, outcome).pipe(
        Effect.andThen(strategy === "none" ? Effect.void : removeEmptyParent(path.dirname(dir))),
        Effect.andThen(reportRelease(options, dir, outcome))
      )
    const placement = yield* place(deps, options, strategy, finish)
    const namespace = namespaceOf({ lockHash: yield* lockfileHash(placement.dir), agentId: options.agentId })
    const dirs = agentDirs(placement.stateDir, options.runId, folderOf(options), namespace)
    created.dirs = dirs
    yield* makeAgentDirs(dirs)
    const { warning: portWarning, ...ports } = yield* deps.ports(options.agentId)
    const env = agentEnv({
      dirs,
      ports,
      namespace,
      runId: options.runId,
      agentId: options.agentId,
      workspaceDir: placement.dir
    })
    const handle: WorkspaceHandle = {
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
      warnings: portWarning === undefined ? placement.warnings : [...placement.warnings, portWarning],
      ...(placement.overlay === undefined ? {} : { overlay: placement.overlay.layers })
    }
    if (placement.lender !== undefined) deps.lenders.set(handle, placement.lender)
    return handle
  })

/**
 * Runs `lastUse` (an agent's commit, say) and then hands the agent's worktree to the run's pool at
 * once, while its work merges; any other workspace just runs `lastUse`.
 */
export const recycleAfter = <A, E, R>(
  deps: Pick<AcquireDeps, "lenders">,
  handle: WorkspaceHandle,
  lastUse: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const lender = deps.lenders.get(handle)
    return lender === undefined ? lastUse : lender(lastUse)
  })
