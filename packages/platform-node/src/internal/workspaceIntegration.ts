import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import type {
  CommitResult,
  ConflictPrediction,
  Integration,
  IntegrationOptions,
  MergeResult,
  WorkspaceHandle
} from "../Workspace.ts"
import { corralIdentity, git, gitOutput } from "./git.ts"
import { BranchAlreadyExists, IntegrationMoved, UnsupportedStrategy, type WorkspaceError } from "./workspaceErrors.ts"
import { attempt } from "./workspaceFs.ts"
import {
  branchExists,
  integrationBranch,
  isAncestor,
  type RepoInfo,
  type RepoLocks,
  resolveCommit,
  resolveRepo,
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

const addAll = (handle: WorkspaceHandle) => [
  "add",
  "--all",
  "--",
  ".",
  ...handle.copiedFiles.map((file) => `:(exclude,literal)${file}`)
]

const trailer = (runId: string, agentId: string) => `\n\nCorral-Run: ${runId}\nCorral-Agent: ${agentId}`

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

const commitAll = (runId: string, handle: WorkspaceHandle, message: string) =>
  Effect.gen(function* () {
    yield* requireWorktree(handle, "commit")
    const cwd = handle.dir
    yield* git(addAll(handle), { cwd })
    const staged = yield* gitOutput(["diff", "--cached", "--quiet"], { cwd, okExitCodes: [1] })
    if (staged.exitCode === 1) {
      const full = `${message}${trailer(runId, handle.agentId)}`
      yield* git([...corralIdentity, "commit", "--quiet", "--no-verify", "-m", full], { cwd })
    }
    const commit = yield* git(["rev-parse", "HEAD"], { cwd })
    return { commit, changed: staged.exitCode === 1 } satisfies CommitResult
  })

const casUpdate = (
  repo: RepoInfo,
  branch: string,
  next: string,
  expected: string
): Effect.Effect<string, WorkspaceError> =>
  git(["update-ref", "-m", "corral: merge", `refs/heads/${branch}`, next, expected], { cwd: repo.root }).pipe(
    Effect.catchTag(
      "GitError",
      (error): Effect.Effect<never, WorkspaceError> =>
        error.stderr.includes("but expected")
          ? Effect.fail(new IntegrationMoved({ repo: repo.root, branch, expected }))
          : Effect.fail(error)
    )
  )

const mergeInto = (repo: RepoInfo, runId: string, branch: string, handle: WorkspaceHandle) =>
  Effect.gen(function* () {
    const agentRef = yield* requireWorktree(handle, "merge")
    const head = yield* resolveCommit(repo, `refs/heads/${branch}`)
    const tip = yield* resolveCommit(repo, `refs/heads/${agentRef}`)
    if (yield* isAncestor(repo.root, tip, head)) return { _tag: "UpToDate", head } satisfies MergeResult
    if (yield* isAncestor(repo.root, head, tip)) {
      yield* casUpdate(repo, branch, tip, head)
      return { _tag: "Merged", head: tip, fastForward: true } satisfies MergeResult
    }
    const merged = yield* mergeTree(repo.root, head, tip)
    if (merged.conflicts.length > 0) {
      return { _tag: "Conflict", head, agentId: handle.agentId, branch: agentRef, paths: merged.conflicts } as const
    }
    const message = `corral: merge ${agentRef} into ${branch}${trailer(runId, handle.agentId)}`
    const commit = yield* git([...corralIdentity, "commit-tree", merged.tree, "-p", head, "-p", tip, "-m", message], {
      cwd: repo.root
    })
    yield* casUpdate(repo, branch, commit, head)
    return { _tag: "Merged", head: commit, fastForward: false } satisfies MergeResult
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
      yield* git(addAll(handle), { cwd, env })
      const tree = yield* git(["write-tree"], { cwd, env })
      const message = `corral: snapshot of ${handle.agentId}`
      return yield* git([...corralIdentity, "commit-tree", tree, "-p", "HEAD", "-m", message], { cwd })
    })
  )

const changedSince = (cwd: string, base: string | undefined, commit: string) =>
  base === undefined
    ? Effect.succeed(undefined)
    : Effect.map(
        gitOutput(["diff", "--name-only", "--no-renames", "-z", base, commit, "--"], { cwd }),
        (out) => new Set(out.stdout.split("\0").filter((file) => file.length > 0))
      )

/**
 * Conflicts between this agent's work and the work in progress of the other live agents. Only files
 * both agents changed themselves count: a change already in an agent's base is not its own (a
 * conflict with merged work is the merge's to report, right after).
 */
const predict = (repo: RepoInfo, handle: WorkspaceHandle, others: ReadonlyArray<WorkspaceHandle>) =>
  Effect.gen(function* () {
    yield* requireWorktree(handle, "predict conflicts")
    const mine = yield* snapshot(handle)
    const mineChanged = yield* changedSince(repo.root, handle.baseCommit, mine)
    const targets = others.filter((other) => other.agentId !== handle.agentId && other.strategy === "worktree")
    const found = yield* Effect.forEach(
      targets,
      (other) =>
        Effect.gen(function* () {
          const theirs = yield* snapshot(other)
          const theirsChanged = yield* changedSince(repo.root, other.baseCommit, theirs)
          const { conflicts } = yield* mergeTree(repo.root, mine, theirs)
          const own = conflicts.filter((file) => (mineChanged?.has(file) ?? true) && (theirsChanged?.has(file) ?? true))
          return own.length === 0 ? [] : [{ agents: [handle.agentId, other.agentId] as const, paths: own }]
        }),
      { concurrency: 4 }
    )
    return found.flat() satisfies ReadonlyArray<ConflictPrediction>
  })

export const makeIntegration = (
  locks: RepoLocks,
  options: IntegrationOptions
): Effect.Effect<Integration, WorkspaceError> =>
  Effect.gen(function* () {
    yield* validateId("runId", options.runId)
    const repo = yield* resolveRepo(options.repo)
    const branch = integrationBranch(options.runId)
    const baseCommit = yield* resolveCommit(repo, options.base ?? "HEAD")
    yield* locks(repo.commonDir).withPermit(
      Effect.gen(function* () {
        if (yield* branchExists(repo.root, branch)) {
          return yield* new BranchAlreadyExists({ repo: repo.root, branch })
        }
        yield* git(["branch", "--no-track", branch, baseCommit], { cwd: repo.root })
      })
    )
    const mergeLock = yield* Semaphore.make(1)
    return {
      repo: repo.root,
      runId: options.runId,
      branch,
      baseCommit,
      head: () => resolveCommit(repo, `refs/heads/${branch}`),
      commitAll: (handle, message) => commitAll(options.runId, handle, message),
      merge: (handle) => mergeLock.withPermit(mergeInto(repo, options.runId, branch, handle)),
      predictConflicts: (handle, others) => predict(repo, handle, others)
    }
  })
