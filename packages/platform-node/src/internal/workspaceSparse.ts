/**
 * Cone-mode sparse worktrees set up in one git pass. `git sparse-checkout set` writes two files of
 * the worktree's own git folder (`config.worktree` and `info/sparse-checkout`) and then checks the
 * tree out a second time; corral writes those files itself before the worktree's one checkout
 * (`read-tree -u` after an add, `checkout -f -b` when a pooled worktree is reused), which applies the
 * cone as it writes files. The patterns are the ones `sparse-checkout set --cone` writes: top-level
 * files, each listed folder recursively and the files directly inside each of its parents.
 *
 * The sparse index (`index.sparse`) is not used: git 2.39 aborts (`BUG: unsupported ce_mode`) when a
 * worktree's cone changes under a sparse index without `sparse-checkout set`, which is the extra
 * pass this module removes.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { git } from "./git.ts"
import { InvalidSparseFolder, WorkspaceIoError } from "./workspaceErrors.ts"
import { attempt, removePath } from "./workspaceFs.ts"
import { worktreeGitDir } from "./workspaceRepo.ts"
import * as Folder from "../Folder.ts"

const pattern = /[*?[\]\\]/

/**
 * The folders as cone mode reads them (`a//b/` is `a/b`), with the same checks as `sparse-checkout
 * set --cone`: a folder, not a pattern, inside the repository.
 */
export const normalizeFolders = (agentId: string, folders: ReadonlyArray<string>) =>
  Effect.forEach(folders, (folder) => {
    const fail = (reason: string) => Effect.fail(new InvalidSparseFolder({ agentId, folder, reason }))
    if (/[\n\r]/.test(folder)) return fail("a folder name cannot hold a line break")
    if (pattern.test(folder)) return fail("name a folder, not a pattern ('*', '?', '[', ']' and '\\' are not allowed)")
    const parts = folder.split("/").filter((part) => part !== "" && part !== ".")
    if (parts.includes("..")) return fail("name a folder inside the repository, without '..'")
    if (parts.length === 0) return fail("name a folder inside the repository, not its root")
    if (parts[0] === ".git") return fail("git's own folder cannot be checked out")
    return Effect.succeed(parts.join("/"))
  }).pipe(Effect.map((normalized) => [...new Set(normalized)].sort()))

const hasAncestorIn = (set: ReadonlySet<string>, folder: string) => {
  for (let at = folder.lastIndexOf("/"); at > 0; at = folder.lastIndexOf("/", at - 1)) {
    if (set.has(folder.slice(0, at))) return true
  }
  return false
}

/** The `info/sparse-checkout` text `git sparse-checkout set --cone -- <folders>` writes. */
export const conePatterns = (folders: ReadonlyArray<string>) => {
  const recursive = new Set(folders)
  const parents = new Set<string>()
  for (const folder of recursive) {
    for (let at = folder.indexOf("/"); at > 0; at = folder.indexOf("/", at + 1)) parents.add(folder.slice(0, at))
  }
  const kept = (folder: string) => !hasAncestorIn(recursive, folder)
  const parentLines = [...parents]
    .filter((p) => kept(p) && !recursive.has(p))
    .sort()
    .map((p) => `/${p}/\n!/${p}/*/\n`)
  const folderLines = [...recursive]
    .filter(kept)
    .sort()
    .map((f) => `/${f}/\n`)
  return `/*\n!/*/\n${parentLines.join("")}${folderLines.join("")}`
}

const enabled = new Set<string>()

/**
 * Turns on `extensions.worktreeConfig` in the repository (what `sparse-checkout set` does on its first
 * use), once per repository and process, so that each worktree's `config.worktree` is read.
 */
export const enableWorktreeConfig = (root: string, commonDir: string) =>
  Effect.suspend(() => {
    if (enabled.has(commonDir)) return Effect.void
    return git(["config", "--local", "extensions.worktreeConfig", "true"], { cwd: root }).pipe(
      Effect.andThen(Effect.sync(() => enabled.add(commonDir)))
    )
  })

const sparseConfig = (cone: boolean) => `[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = ${cone}\n`

const gitDirOf = (dir: string) =>
  Effect.flatMap(worktreeGitDir(dir), (gitDir) =>
    gitDir === undefined
      ? Effect.fail(
          new WorkspaceIoError({ path: dir, operation: "read the git folder of", cause: new Error("no .git file") })
        )
      : Effect.succeed(gitDir)
  )

const writeFiles = (gitDir: string, config: string, patterns: string) =>
  attempt("write the sparse checkout of", gitDir, async () => {
    Folder.makeSync(path.join(gitDir, "info"))
    await fs.writeFile(path.join(gitDir, "info", "sparse-checkout"), patterns)
    await fs.writeFile(path.join(gitDir, "config.worktree"), config)
  })

/** Makes the worktree's next checkout write only `folders` (normalized) and the top-level files. */
export const setCone = (dir: string, folders: ReadonlyArray<string>) =>
  Effect.flatMap(gitDirOf(dir), (gitDir) => writeFiles(gitDir, sparseConfig(true), conePatterns(folders)))

/** Whether the worktree has a sparse checkout (one written by {@link setCone}). */
export const isSparse = (dir: string) =>
  Effect.flatMap(gitDirOf(dir), (gitDir) =>
    attempt("read", gitDir, () =>
      fs.access(path.join(gitDir, "config.worktree")).then(
        () => true,
        () => false
      )
    )
  )

/**
 * Makes the worktree's next checkout write every file again (what `sparse-checkout disable` does:
 * a pattern matching everything), and returns what turns sparse checkout off once it has run.
 */
export const widen = (dir: string) =>
  Effect.flatMap(gitDirOf(dir), (gitDir) =>
    Effect.as(
      writeFiles(gitDir, sparseConfig(false), "/*\n"),
      removePath(path.join(gitDir, "config.worktree")).pipe(
        Effect.andThen(removePath(path.join(gitDir, "info", "sparse-checkout")))
      )
    )
  )
