import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type { GitFailure } from "./git.ts"
import { attempt, type FsFailure, listDir, readTextOrUndefined } from "./workspaceFs.ts"
import { locateRepo } from "./workspaceRepo.ts"
import * as Folder from "../Folder.ts"

export type RegistryEntry =
  | { readonly branch: string }
  | { readonly worktree: string }
  | { readonly copy: string; readonly worktree: string }
  | { readonly disposable: true }

export interface RunRecords {
  readonly runId: string
  readonly branches: ReadonlyArray<string>
  readonly worktrees: ReadonlyArray<string>
  /** Files corral copied into a worktree (`copyFiles`), as absolute paths. */
  readonly copies: ReadonlyArray<string>
  /** The run's workspaces are disposable (`AcquireOptions.disposable`): gc removes them whatever they hold. */
  readonly disposable: boolean
}

/**
 * The folder holding every run's lease and records for `repo`: `<git-common-dir>/corral` in a git
 * repository (shared by all its worktrees, whatever state folder a command uses), else `<repo>/.corral`.
 */
export const registryRoot = (repo: string): Effect.Effect<string, GitFailure | FsFailure> =>
  locateRepo(repo).pipe(
    Effect.map((info) => path.join(info.commonDir, "corral")),
    Effect.catchTag("NotAGitRepository", () => Effect.succeed(path.join(path.resolve(repo), ".corral")))
  )

export const recordsPath = (root: string, runId: string) => path.join(root, "runs", `${runId}.records`)

/** Appends `entry` to the run's records; written before corral creates the thing it names. */
export const appendRecord = (root: string, runId: string, entry: RegistryEntry) =>
  attempt("record in", recordsPath(root, runId), async () => {
    Folder.makeSync(path.join(root, "runs"))
    await fs.appendFile(recordsPath(root, runId), `${JSON.stringify(entry)}\n`)
  })

const parseRecords = (runId: string, text: string | undefined): RunRecords => {
  const branches = new Set<string>()
  const worktrees = new Set<string>()
  const copies = new Set<string>()
  let disposable = false
  for (const line of (text ?? "").split("\n")) {
    if (line.trim() === "") continue
    try {
      const entry = JSON.parse(line) as Partial<{ branch: string; worktree: string; copy: string; disposable: true }>
      if (entry.disposable === true) disposable = true
      else if (typeof entry.copy === "string" && typeof entry.worktree === "string")
        copies.add(path.join(entry.worktree, entry.copy))
      else if (typeof entry.worktree === "string") worktrees.add(entry.worktree)
      else if (typeof entry.branch === "string") branches.add(entry.branch)
    } catch {
      // a line cut short by a crash names nothing; the entry before it was written whole
    }
  }
  return { runId, branches: [...branches], worktrees: [...worktrees], copies: [...copies], disposable }
}

export const readRecords = (root: string, runId: string) =>
  readTextOrUndefined(recordsPath(root, runId)).pipe(Effect.map((text) => parseRecords(runId, text)))

export const listRecordedRuns = (root: string) =>
  listDir(path.join(root, "runs")).pipe(
    Effect.map((entries) =>
      entries.filter((entry) => entry.name.endsWith(".records")).map((entry) => entry.name.slice(0, -".records".length))
    )
  )

/**
 * Sets the modification time of the run's records to now, as its lease goes at its end: `Workspace.gc`
 * counts the age of a run without a lease from it. A run that recorded nothing has no file to touch.
 */
export const touchRecords = (root: string, runId: string) =>
  Effect.promise(() => {
    const now = new Date()
    return fs.utimes(recordsPath(root, runId), now, now).catch(() => undefined)
  })

export const removeRecords = (root: string, runId: string) =>
  attempt("remove", recordsPath(root, runId), () => fs.rm(recordsPath(root, runId), { force: true }))
