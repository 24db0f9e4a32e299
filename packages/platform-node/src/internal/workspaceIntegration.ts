import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import type {
  CommittedWork,
  CommitResult,
  History,
  Identity,
  ConflictPrediction,
  FetchedWork,
  Integration,
  IntegrationOptions,
  MergeResult,
  WorkspaceHandle
} from "../Workspace.ts"
import { corralIdentity, GitError, git, gitOutput, lines } from "./git.ts"
import { appendRecord } from "./runRegistry.ts"
import { BranchAlreadyExists, IntegrationMoved, UnsupportedStrategy, type WorkspaceError } from "./workspaceErrors.ts"
import { attempt } from "./workspaceFs.ts"
import { rememberCommit } from "./overlayCommitted.ts"
import { changedPaths, findUnshare, inMount, isEmpty } from "./workspaceOverlay.ts"
import {
  branchExists,
  integrationBranch,
  isAncestor,
  markMerged,
  type RepoInfo,
  type RepoLocks,
  resolveCommit,
  resolveRepo,
  worktreeGitDir,
  validateId
} from "./workspaceRepo.ts"

interface MergeTree {
  readonly tree: string
  readonly conflicts: ReadonlyArray<string>
}

const requireWorktree = (handle: WorkspaceHandle, operation: string) =>
  handle.strategy === "worktree" && handle.branch !== undefined
    ? Effect.succeed(handle.branch)
    : Effect.fail(new UnsupportedStrategy({ agentId: handle.agentId, strategy: handle.strategy, operation }))

/**
 * Loose objects stored without zlib: an agent's `add` costs ≈ 25 % less CPU, and each later checkout of
 * those blobs (a snapshot's, a recycled worktree's) ≈ 30 % less, for objects ≈ 2–3× larger on disk until
 * git packs them (a pack compresses them as usual).
 */
const storedLoose = ["-c", "core.looseCompression=0"]

/**
 * An overlay workspace's `add` (in the mount, an index without stat data) and `commit` (outside it,
 * where the folder holds only `.git`) without git's preload threads, which `lstat` the index's
 * entries in parallel before the refresh does it again: there they cost more CPU than they save
 * (`perf stat -e task-clock`, 2,000-entry index, tmpfs: `commit` ≈ 12 → 4.5 ms, `add` of 200
 * rewritten files in the mount ≈ 19 → 17 ms). The result is the same; full worktrees keep git's
 * default (no difference measured for their `add --all` and `status`).
 */
const noPreload = ["-c", "core.preloadIndex=false"]

const addAll = (handle: WorkspaceHandle) => [
  ...storedLoose,
  "add",
  "--all",
  "--",
  ".",
  ...handle.copiedFiles.map((file) => `:(exclude,literal)${file}`)
]

const ignoredPaths = /^The following paths are ignored by one of your \.gitignore files:/m

/**
 * `git add` of what an agent changed: in a worktree, everything (`add --all -- .`); in an overlay
 * workspace, only the paths in its upper folder, inside its mount (explicitly named ignored files
 * make `add` exit 1 after adding the rest: they stay out, as in a worktree).
 */
const stage = (handle: WorkspaceHandle, env?: Record<string, string>) =>
  Effect.gen(function* () {
    const cwd = handle.dir
    if (handle.overlay === undefined) return yield* Effect.as(git(addAll(handle), { cwd, env }), undefined)
    const walkedAtMs = Date.now()
    const found = yield* changedPaths(handle.overlay)
    const staged = { upper: found.upper, walkedAtMs }
    const changes = { ...found, paths: found.paths.filter((p) => !handle.copiedFiles.includes(p)) }
    if (isEmpty(changes)) return staged
    const run = inMount(findUnshare() ?? "unshare", handle.overlay, cwd, changes)
    const args = [...storedLoose, ...noPreload, "add", "--all", "--", ...run.paths]
    const out = yield* gitOutput(args, { cwd, via: run.via, env: { ...env, ...run.env }, okExitCodes: [1] })
    if (out.exitCode === 1 && !(ignoredPaths.test(out.stderr) && !/^(fatal|error):/m.test(out.stderr))) {
      return yield* new GitError({ args, cwd, exitCode: 1, stderr: out.stderr })
    }
    return staged
  })

const trailerLines = (runId: string, agentId: string) => `Corral-Run: ${runId}\nCorral-Agent: ${agentId}`

const withTrailers = (message: string, runId: string, agentId: string) =>
  message.includes(`Corral-Agent: ${agentId}`)
    ? message
    : `${message.replace(/\s+$/, "")}\n\n${trailerLines(runId, agentId)}`

const identityEnv = (author: Identity, committer: Identity): Record<string, string> => ({
  GIT_AUTHOR_NAME: author.name,
  GIT_AUTHOR_EMAIL: author.email,
  GIT_COMMITTER_NAME: committer.name,
  GIT_COMMITTER_EMAIL: committer.email
})

const noSigning = ["-c", "commit.gpgsign=false"]

export const mergeTree = (cwd: string, ours: string, theirs: string): Effect.Effect<MergeTree, WorkspaceError> =>
  gitOutput(["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs], {
    cwd,
    okExitCodes: [1]
  }).pipe(
    Effect.map((out) => {
      const [tree = "", ...paths] = out.stdout.split("\0").filter((part) => part.length > 0)
      return { tree: tree.trim(), conflicts: out.exitCode === 1 ? [...new Set(paths)].sort() : [] }
    })
  )

const pairOf = (a: string, b: string) => (a < b ? `${a} ${b}` : `${b} ${a}`)

/** `git merge-tree` of two commits, reusing the last result for the same pair (merging is symmetric). */
const mergeOf = (state: State, ours: string, theirs: string) =>
  Effect.suspend(() => {
    const pair = pairOf(ours, theirs)
    if (state.lastMerge?.pair === pair) return Effect.succeed(state.lastMerge.result)
    return Effect.tap(mergeTree(state.repo.root, ours, theirs), (result) =>
      Effect.sync(() => {
        state.lastMerge = { pair, result }
      })
    )
  })

interface State {
  readonly repo: RepoInfo
  readonly runId: string
  readonly branch: string
  readonly history: History
  readonly author: Identity
  readonly committer: Identity
  /** The integration head as this process last set it (the compare-and-swap update checks it). */
  head: string | undefined
  /** Every commit this process set the branch to: a commit whose only parent is one of them descends from it. */
  readonly pastHeads: Set<string>
  /** The last merge computed (by a prediction or a merge), reused when the same pair is merged next. */
  lastMerge: { readonly pair: string; readonly result: MergeTree } | undefined
  /** Commits made by `commitAll`, per workspace, with their messages. */
  /** Files changed between two commits, by `base..commit`. */
  readonly changedFiles: Map<string, ReadonlySet<string>>
  readonly committed: WeakMap<
    WorkspaceHandle,
    { readonly commit: string; readonly message: string; readonly parents: ReadonlyArray<string> }
  >
}

const nothingToCommit = /nothing (added )?to commit|no changes added to commit/

/** A reflog line of a single-parent commit (a merge's reads `commit (merge):`, a root commit's `commit (initial):`). */
const reflogEntry = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) [^\t]*\tcommit: /

/**
 * The commit `git commit` just made and its parent, from the last line of the worktree's HEAD reflog
 * (which the commit writes: `core.logAllRefUpdates=true`), read without starting git. `undefined`
 * when that line is not a single-parent commit's (a merge the agent left in progress, which the
 * commit concluded, has two parents).
 */
const madeCommit = (gitDir: string | undefined) =>
  Effect.promise(async () => {
    if (gitDir === undefined) return undefined
    const log = await fs.readFile(path.join(gitDir, "logs", "HEAD"), "utf8").catch(() => "")
    const last = log.slice(log.lastIndexOf("\n", log.length - 2) + 1)
    const found = reflogEntry.exec(last)
    return found === null ? undefined : { commit: found[2]!, parents: [found[1]!] }
  })

/**
 * A commit of everything in `handle`'s worktree, with corral's trailers; `message` and `parents`
 * describe it (`parents` only when `changed`). The new commit and its parent are read from the
 * worktree's HEAD reflog, not with a `log -1` (one git command less per agent); a merge the agent
 * left in progress, which `git commit` concludes, still asks git.
 */
export const commitWork = (
  handle: WorkspaceHandle,
  options: { readonly runId: string; readonly message: string; readonly author: Identity; readonly committer: Identity }
) =>
  Effect.gen(function* () {
    yield* requireWorktree(handle, "commit")
    const cwd = handle.dir
    const staged = yield* stage(handle)
    const full = withTrailers(options.message, options.runId, handle.agentId)
    const args = [
      ...noSigning,
      ...(handle.overlay === undefined ? [] : noPreload),
      "-c",
      "core.logAllRefUpdates=true",
      "commit",
      "--quiet",
      "--no-verify",
      "--untracked-files=no",
      "-m",
      full
    ]
    const out = yield* gitOutput(args, { cwd, env: identityEnv(options.author, options.committer), okExitCodes: [1] })
    if (out.exitCode === 1 && !nothingToCommit.test(out.stdout + out.stderr)) {
      return yield* new GitError({ args, cwd, exitCode: 1, stderr: out.stderr || out.stdout })
    }
    const changed = out.exitCode === 0
    const gitDir = staged !== undefined || changed ? yield* worktreeGitDir(cwd) : undefined
    if (staged !== undefined) {
      yield* rememberCommit(handle.overlay!.upper, gitDir, staged.upper, staged.walkedAtMs, handle.copiedFiles)
    }
    const made = changed ? yield* madeCommit(gitDir) : undefined
    if (made !== undefined) return { ...made, changed, message: full }
    const [commit = "", ...parents] = (yield* git(["log", "-1", "--format=%H %P"], { cwd })).split(" ")
    return { commit, changed, message: full, parents }
  })

const commitAll = (state: State, handle: WorkspaceHandle, message: string) =>
  Effect.map(
    commitWork(handle, { runId: state.runId, message, author: state.author, committer: state.committer }),
    ({ commit, changed, message: full, parents }) => {
      if (changed) state.committed.set(handle, { commit, message: full, parents })
      return { commit, changed } satisfies CommitResult
    }
  )

const casUpdate = (
  repo: RepoInfo,
  branch: string,
  next: string,
  expected: string
): Effect.Effect<string, WorkspaceError> =>
  git(["update-ref", "-m", "corral: merge", "--", `refs/heads/${branch}`, next, expected], { cwd: repo.root }).pipe(
    Effect.catchTag(
      "GitError",
      (error): Effect.Effect<never, WorkspaceError> =>
        error.stderr.includes("but expected")
          ? Effect.fail(new IntegrationMoved({ repo: repo.root, branch, expected }))
          : Effect.fail(error)
    )
  )

interface SeriesCommit {
  readonly commit: string
  readonly parents: ReadonlyArray<string>
  readonly authorName: string
  readonly authorEmail: string
  readonly authorDate: string
  readonly message: string
}

const seriesOf = (repo: RepoInfo, head: string, tip: string) =>
  git(["log", "-z", "--reverse", "--topo-order", "--format=%H%x01%P%x01%an%x01%ae%x01%aI%x01%B", `${head}..${tip}`], {
    cwd: repo.root
  }).pipe(
    Effect.map((out) =>
      out
        .split("\0")
        .filter((entry) => entry.trim().length > 0)
        .map((entry): SeriesCommit => {
          const [commit = "", parents = "", authorName = "", authorEmail = "", authorDate = "", message = ""] = entry
            .replace(/^\n/, "")
            .split("\x01")
          return {
            commit,
            parents: parents.split(" ").filter((p) => p !== ""),
            authorName,
            authorEmail,
            authorDate,
            message
          }
        })
    )
  )

type Landed =
  | { readonly _tag: "Landed"; readonly commit: string }
  | { readonly _tag: "Conflict"; readonly paths: ReadonlyArray<string> }

const commitTree = (state: State, tree: string, parents: ReadonlyArray<string>, message: string, author: Identity) =>
  git([...noSigning, "commit-tree", tree, ...parents.flatMap((p) => ["-p", p]), "-m", message], {
    cwd: state.repo.root,
    env: identityEnv(author, state.committer)
  })

const mergeCommit = (state: State, head: string, tip: string, agentRef: string, agentId: string) =>
  Effect.gen(function* () {
    const merged = yield* mergeOf(state, head, tip)
    if (merged.conflicts.length > 0) return { _tag: "Conflict", paths: merged.conflicts } satisfies Landed
    const message = withTrailers(`corral: merge ${agentRef} into ${state.branch}`, state.runId, agentId)
    const commit = yield* commitTree(state, merged.tree, [head, tip], message, state.author)
    return { _tag: "Landed", commit } satisfies Landed
  })

const squashCommit = (state: State, head: string, tip: string, message: string, agentId: string) =>
  Effect.gen(function* () {
    const merged = yield* mergeTree(state.repo.root, head, tip)
    if (merged.conflicts.length > 0) return { _tag: "Conflict", paths: merged.conflicts } satisfies Landed
    const commit = yield* commitTree(
      state,
      merged.tree,
      [head],
      withTrailers(message, state.runId, agentId),
      state.author
    )
    return { _tag: "Landed", commit } satisfies Landed
  })

/**
 * Replays each commit of the agent onto the integration head without a working tree: a throwaway
 * commit whose parents are the current head and the replayed commit's parent makes that parent the
 * merge base, so `merge-tree` applies exactly the commit's own change (a cherry-pick).
 */
const replaySeries = (state: State, head: string, tip: string, agentId: string, fallback: string) =>
  Effect.gen(function* () {
    const series = yield* seriesOf(state.repo, head, tip)
    if (series.some((c) => c.parents.length !== 1)) return yield* squashCommit(state, head, tip, fallback, agentId)
    let current = head
    for (const c of series) {
      const pivot = yield* commitTree(
        state,
        `${current}^{tree}`,
        [current, c.parents[0]!],
        "corral: replay base",
        state.author
      )
      const merged = yield* mergeTree(state.repo.root, pivot, c.commit)
      if (merged.conflicts.length > 0) return { _tag: "Conflict", paths: merged.conflicts } satisfies Landed
      const author = { name: c.authorName, email: c.authorEmail }
      current = yield* commitTree(state, merged.tree, [current], withTrailers(c.message, state.runId, agentId), author)
    }
    return { _tag: "Landed", commit: current } satisfies Landed
  })

const isFetched = (work: WorkspaceHandle | FetchedWork): work is FetchedWork => "commit" in work

const mergeInto = (state: State, handle: WorkspaceHandle | FetchedWork) =>
  Effect.gen(function* () {
    const { repo, branch } = state
    const agentRef = isFetched(handle) ? handle.branch : yield* requireWorktree(handle, "merge")
    const head = state.head ?? (yield* resolveCommit(repo, `refs/heads/${branch}`))
    const made = isFetched(handle) ? undefined : state.committed.get(handle)
    const tip = isFetched(handle)
      ? handle.commit
      : (made?.commit ?? (yield* resolveCommit(repo, `refs/heads/${agentRef}`)))
    if (tip === head || (made === undefined && (yield* isAncestor(repo.root, tip, head)))) {
      return { _tag: "UpToDate", head } satisfies MergeResult
    }
    const message = made?.message ?? `corral ${state.runId}: ${handle.agentId}`
    const parent = made !== undefined && made.parents.length === 1 ? made.parents[0] : undefined
    const onHead = parent === head
    const behindHead = parent !== undefined && parent !== head && state.pastHeads.has(parent)
    const fastForward = onHead || (!behindHead && (yield* isAncestor(repo.root, head, tip)))
    if (state.history !== "squash" && fastForward) {
      if (state.history === "linear") {
        const series = yield* seriesOf(repo, head, tip)
        if (series.some((c) => c.parents.length !== 1)) {
          return yield* land(
            state,
            handle,
            agentRef,
            head,
            tip,
            yield* squashCommit(state, head, tip, message, handle.agentId)
          )
        }
      }
      yield* casUpdate(repo, branch, tip, head)
      state.head = tip
      state.pastHeads.add(tip)
      markMerged(repo, agentRef, tip)
      return { _tag: "Merged", head: tip, fastForward: true } satisfies MergeResult
    }
    const landed =
      state.history === "merge"
        ? yield* mergeCommit(state, head, tip, agentRef, handle.agentId)
        : state.history === "squash"
          ? yield* squashCommit(state, head, tip, message, handle.agentId)
          : yield* replaySeries(state, head, tip, handle.agentId, message)
    return yield* land(state, handle, agentRef, head, tip, landed)
  }).pipe(
    Effect.tapError((error) =>
      Effect.sync(() => {
        if (error._tag === "IntegrationMoved") state.head = undefined
      })
    )
  )

const land = (
  state: State,
  handle: WorkspaceHandle | FetchedWork,
  agentRef: string,
  head: string,
  tip: string,
  landed: Landed
) =>
  Effect.gen(function* () {
    if (landed._tag === "Conflict") {
      return { _tag: "Conflict", head, agentId: handle.agentId, branch: agentRef, paths: landed.paths } as const
    }
    yield* casUpdate(state.repo, state.branch, landed.commit, head)
    state.head = landed.commit
    state.pastHeads.add(landed.commit)
    markMerged(state.repo, agentRef, tip)
    return { _tag: "Merged", head: landed.commit, fastForward: false } satisfies MergeResult
  })

const withTempIndex = <A, E>(use: (indexFile: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    attempt("create temporary folder in", os.tmpdir(), () => fs.mkdtemp(path.join(os.tmpdir(), "corral-index-"))),
    (dir) => use(path.join(dir, "index")),
    (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
  )

export const snapshot = (handle: WorkspaceHandle): Effect.Effect<string, WorkspaceError> =>
  withTempIndex((indexFile) =>
    Effect.gen(function* () {
      const cwd = handle.dir
      const current = yield* git(["rev-parse", "--path-format=absolute", "--git-path", "index"], { cwd })
      yield* attempt("copy", current, () => fs.copyFile(current, indexFile).catch(() => undefined))
      const env = { GIT_INDEX_FILE: indexFile }
      yield* stage(handle, env)
      const tree = yield* git(["write-tree"], { cwd, env })
      const message = `corral: snapshot of ${handle.agentId}`
      return yield* git([...corralIdentity, "commit-tree", tree, "-p", "HEAD", "-m", message], { cwd })
    })
  )

/** Files `commit` changed since `base` (cached per pair: commits don't change). */
const changedFiles = (state: State, base: string | undefined, commit: string) => {
  if (base === undefined) return Effect.succeed(undefined)
  const key = `${base}..${commit}`
  const known = state.changedFiles.get(key)
  if (known !== undefined) return Effect.succeed(known)
  return Effect.map(
    gitOutput(["diff", "--name-only", "--no-renames", "-z", base, commit, "--"], { cwd: state.repo.root }),
    (out) => {
      const files: ReadonlySet<string> = new Set(out.stdout.split("\0").filter((file) => file.length > 0))
      state.changedFiles.set(key, files)
      return files
    }
  )
}

const targetCommit = (state: State, target: WorkspaceHandle | CommittedWork): Effect.Effect<string, WorkspaceError> => {
  if ("commit" in target) return Effect.succeed(target.commit)
  const made = state.committed.get(target)
  return made === undefined ? snapshot(target) : Effect.succeed(made.commit)
}

const baseOf = (target: WorkspaceHandle | CommittedWork): string | undefined =>
  "commit" in target ? target.base : target.baseCommit

/**
 * Conflicts between this agent's work and the other live agents' work, from committed work (or a
 * snapshot of a worktree not yet committed), never from a worktree being removed. Only files both
 * agents changed themselves count: a change already in an agent's base is not its own, and a
 * conflict with merged work is the merge's to report, right after.
 */
const predict = (
  state: State,
  handle: WorkspaceHandle | FetchedWork,
  others: ReadonlyArray<WorkspaceHandle | CommittedWork>
) =>
  Effect.gen(function* () {
    if (!isFetched(handle)) yield* requireWorktree(handle, "predict conflicts")
    const targets = others.filter(
      (other) => other.agentId !== handle.agentId && ("commit" in other || other.strategy === "worktree")
    )
    if (targets.length === 0) return []
    const mine = isFetched(handle) ? handle.commit : (state.committed.get(handle)?.commit ?? (yield* snapshot(handle)))
    const mineChanged = yield* changedFiles(state, baseOf(handle), mine)
    const found = yield* Effect.forEach(
      targets,
      (other) =>
        Effect.gen(function* () {
          const theirs = yield* targetCommit(state, other)
          const theirsChanged = yield* changedFiles(state, baseOf(other), theirs)
          const { conflicts } = yield* mergeOf(state, mine, theirs)
          const own = conflicts.filter((file) => (mineChanged?.has(file) ?? true) && (theirsChanged?.has(file) ?? true))
          return own.length === 0 ? [] : [{ agents: [handle.agentId, other.agentId] as const, paths: own }]
        }),
      { concurrency: 4 }
    )
    return found.flat() satisfies ReadonlyArray<ConflictPrediction>
  })

const fallbackIdentity: Identity = { name: "corral", email: "corral@localhost" }

/** The user's `user.name` and `user.email` in `repo`, or corral's own identity when either is unset. */
const userIdentity = (repo: RepoInfo) =>
  gitOutput(["config", "--get-regexp", "^user\\.(name|email)$"], { cwd: repo.root, okExitCodes: [1] }).pipe(
    Effect.map((out): Identity => {
      const values = new Map(
        lines(out.stdout).map((line) => {
          const space = line.indexOf(" ")
          return [line.slice(0, space), line.slice(space + 1)] as const
        })
      )
      const name = values.get("user.name")
      const email = values.get("user.email")
      return name === undefined || email === undefined || name === "" ? fallbackIdentity : { name, email }
    })
  )

/**
 * `update-ref -d` with the base as the expected value: git refuses when the branch moved meanwhile,
 * so a head corral no longer knows (another process moved the branch under a merge) is tried too.
 */
const dropIfEmpty = (locks: RepoLocks, state: State, baseCommit: string) =>
  Effect.suspend(() =>
    state.head !== undefined && state.head !== baseCommit
      ? Effect.succeed(false)
      : locks(state.repo.commonDir).withPermit(
          git(["update-ref", "-d", `refs/heads/${state.branch}`, baseCommit], { cwd: state.repo.root }).pipe(
            Effect.as(true),
            Effect.catchTag("GitError", () => Effect.succeed(false))
          )
        )
  )

export const makeIntegration = (
  locks: RepoLocks,
  options: IntegrationOptions
): Effect.Effect<Integration, WorkspaceError> =>
  Effect.gen(function* () {
    yield* validateId("runId", options.runId)
    const repo = yield* resolveRepo(options.repo)
    const branch = integrationBranch(options.runId)
    // `resolveRepo` read HEAD already; the user's identity is read while the branch is created.
    const baseCommit = options.base === undefined ? repo.head : yield* resolveCommit(repo, options.base)
    const [author] = yield* Effect.all(
      [
        options.author === undefined ? userIdentity(repo) : Effect.succeed(options.author),
        locks(repo.commonDir).withPermit(
          Effect.gen(function* () {
            if (yield* branchExists(repo.root, branch)) {
              return yield* new BranchAlreadyExists({ repo: repo.root, branch })
            }
            yield* appendRecord(path.join(repo.commonDir, "corral"), options.runId, { branch })
            yield* git(["branch", "--no-track", "--", branch, baseCommit], { cwd: repo.root })
          })
        )
      ],
      { concurrency: "unbounded" }
    )
    const mergeLock = yield* Semaphore.make(1)
    const state: State = {
      repo,
      runId: options.runId,
      branch,
      history: options.history ?? "merge",
      author,
      committer: options.committer ?? author,
      head: baseCommit,
      pastHeads: new Set([baseCommit]),
      lastMerge: undefined,
      changedFiles: new Map(),
      committed: new WeakMap()
    }
    return {
      repo: repo.root,
      runId: options.runId,
      branch,
      baseCommit,
      history: state.history,
      author: state.author,
      committer: state.committer,
      head: () =>
        Effect.suspend(() =>
          state.head !== undefined ? Effect.succeed(state.head) : resolveCommit(repo, `refs/heads/${branch}`)
        ),
      commitAll: (handle, message) => commitAll(state, handle, message),
      merge: (handle) => mergeLock.withPermit(mergeInto(state, handle)),
      predictConflicts: (handle, others) => predict(state, handle, others),
      dropIfEmpty: () => mergeLock.withPermit(dropIfEmpty(locks, state, baseCommit))
    }
  })
