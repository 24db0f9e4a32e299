import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import { type GitFailure, git, gitTest, lines } from "./git.ts"
import { InvalidWorkspaceId, NotAGitRepository } from "./workspaceErrors.ts"
import { attempt, exists, type FsFailure } from "./workspaceFs.ts"
import * as Folder from "../Folder.ts"

export interface RepoInfo {
  readonly root: string
  readonly commonDir: string
  readonly head: string
}

export const integrationName = "integration"
export const branchPrefix = "corral/"
export const agentBranch = (runId: string, agentId: string) => `${branchPrefix}${runId}/${agentId}`
export const integrationBranch = (runId: string) => `${branchPrefix}${runId}/${integrationName}`

const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export const validateId = (field: "runId" | "agentId" | "folder", value: string) => {
  if (!idPattern.test(value) || value.endsWith(".lock") || value.includes("..")) {
    const reason = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return Effect.fail(new InvalidWorkspaceId({ field, value, reason }))
  }
  if (field !== "runId" && value === integrationName) {
    return Effect.fail(
      new InvalidWorkspaceId({ field, value, reason: "the name is reserved for the integration branch" })
    )
  }
  return Effect.void
}

const locations = new Map<string, { readonly root: string; readonly commonDir: string }>()

const locate = (
  absolute: string
): Effect.Effect<{ readonly root: string; readonly commonDir: string }, NotAGitRepository | GitFailure | FsFailure> =>
  Effect.gen(function* () {
    const known = locations.get(absolute)
    if (known !== undefined && (yield* exists(known.commonDir))) return known
    if (!(yield* exists(absolute))) return yield* new NotAGitRepository({ path: absolute })
    const out = yield* git(["rev-parse", "--show-toplevel", "--path-format=absolute", "--git-common-dir"], {
      cwd: absolute
    }).pipe(Effect.catchTag("GitError", () => Effect.fail(new NotAGitRepository({ path: absolute }))))
    const [root = "", commonDir = ""] = out.split("\n")
    const found = { root, commonDir }
    locations.set(absolute, found)
    return found
  })

/** The repository holding `repo`; its root and git folder are looked up once per process. */
export const resolveRepo = (repo: string): Effect.Effect<RepoInfo, NotAGitRepository | GitFailure | FsFailure> =>
  Effect.gen(function* () {
    const absolute = path.resolve(repo)
    const { root, commonDir } = yield* locate(absolute)
    const head = yield* git(["rev-parse", "--verify", "HEAD^{commit}"], { cwd: root }).pipe(
      Effect.catchTag("GitError", () => Effect.fail(new NotAGitRepository({ path: absolute })))
    )
    return { root, commonDir, head }
  })

/** The repository's root and git folder without its `HEAD` (one git command the first time, none after). */
export const locateRepo = (repo: string) => locate(path.resolve(repo))

export const resolveCommit = (repo: RepoInfo, rev: string) =>
  git(["rev-parse", "--verify", `${rev}^{commit}`], { cwd: repo.root })

export const branchExists = (cwd: string, branch: string) =>
  gitTest(["show-ref", "--verify", "--quiet", `refs/heads/${branch}`], { cwd })

export const isAncestor = (cwd: string, ancestor: string, descendant: string) =>
  gitTest(["merge-base", "--is-ancestor", ancestor, descendant], { cwd })

export const userCheckoutDirty = (root: string) =>
  git(["status", "--porcelain", "--untracked-files=no"], { cwd: root }).pipe(Effect.map((out) => out.length > 0))

/**
 * What a worktree holds besides its commit: uncommitted changes or untracked files (`dirty`), else
 * only ignored files (`ignored`), else nothing (`clean`). One `status` that lists an ignored or
 * untracked folder as one entry, without walking it.
 */
export const worktreeState = (dir: string) =>
  git(["status", "--porcelain", "--ignored", "--untracked-files=normal"], { cwd: dir }).pipe(
    Effect.map((out) => {
      const entries = lines(out)
      if (entries.length === 0) return "clean" as const
      return entries.every((entry) => entry.startsWith("!! ")) ? ("ignored" as const) : ("dirty" as const)
    })
  )

export const excludeStateDir = (repo: RepoInfo, stateDir: string) => {
  const relative = path.relative(repo.root, stateDir)
  if (relative.startsWith("..") || path.isAbsolute(relative)) return Effect.void
  const pattern = `/${relative.split(path.sep).join("/")}/`
  const file = path.join(repo.commonDir, "info", "exclude")
  return attempt("update", file, async () => {
    const current = await fs.readFile(file, "utf8").catch(() => "")
    if (current.split("\n").includes(pattern)) return
    Folder.makeSync(path.dirname(file))
    const separator = current.length === 0 || current.endsWith("\n") ? "" : "\n"
    await fs.appendFile(file, `${separator}# corral workspaces\n${pattern}\n`)
  })
}

/** A worktree's own git folder, from its `.git` file (`undefined` when it has none). */
export const worktreeGitDir = (dir: string) =>
  Effect.promise(async () => {
    const link = await fs.readFile(path.join(dir, ".git"), "utf8").catch(() => undefined)
    const gitDir = link === undefined ? undefined : /^gitdir: (.+)$/m.exec(link)?.[1]
    return gitDir === undefined ? undefined : path.resolve(dir, gitDir.trim())
  })

const mergedTips = new Map<string, string>()

/** Notes that `branch` was merged at `tip`: its release may delete it while it still points there. */
export const markMerged = (repo: RepoInfo, branch: string, tip: string) => {
  mergedTips.set(`${repo.commonDir}\0${branch}`, tip)
}

/** The tip at which `branch` was merged by this process, forgotten once read. */
export const takeMergedTip = (commonDir: string, branch: string): string | undefined => {
  const key = `${commonDir}\0${branch}`
  const tip = mergedTips.get(key)
  mergedTips.delete(key)
  return tip
}

export const makeRepoLocks = () => {
  const locks = new Map<string, Semaphore.Semaphore>()
  return (commonDir: string): Semaphore.Semaphore => {
    const existing = locks.get(commonDir)
    if (existing !== undefined) return existing
    const created = Semaphore.makeUnsafe(1)
    locks.set(commonDir, created)
    return created
  }
}

export type RepoLocks = ReturnType<typeof makeRepoLocks>
