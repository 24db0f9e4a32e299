/**
 * Where a command works: the target repository (`--repo`, default the current directory) and the
 * state directory (`--state-dir`, `CORRAL_HOME`, default `.corral` at the top of the git work tree
 * holding `--repo`, or `<repo>/.corral` outside one).
 *
 * @since 0.1.0
 */
import * as Workspace from "@corral/platform-node/Workspace"
import { spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { invalidInput } from "./CliExit.ts"
import * as Folder from "@corral/platform-node/Folder"

/**
 * @since 0.1.0
 * @category models
 */
export interface Paths {
  readonly repo: string
  readonly stateDir: string
}

/**
 * The folders `GIT_CEILING_DIRECTORIES` names, as git reads them: absolute entries only, each with its
 * symbolic links resolved (one that does not exist is dropped) unless it follows an empty entry.
 */
const ceilingDirectories = (value: string | undefined): ReadonlySet<string> => {
  const ceilings = new Set<string>()
  if (value === undefined || value === "") return ceilings
  let resolveLinks = true
  for (const entry of value.split(NodePath.delimiter)) {
    if (entry === "") resolveLinks = false
    else if (!NodePath.isAbsolute(entry)) continue
    else if (!resolveLinks) ceilings.add(NodePath.resolve(entry))
    else {
      const real = realPath(entry)
      if (real !== undefined) ceilings.add(real)
    }
  }
  return ceilings
}

const realPath = (path: string): string | undefined => {
  try {
    return NodeFs.realpathSync.native(path)
  } catch {
    return undefined
  }
}

/** Git's reading of a boolean variable such as `GIT_DISCOVERY_ACROSS_FILESYSTEM` (unset: false). */
const gitBoolean = (value: string | undefined): boolean =>
  value !== undefined && (/^(true|yes|on)$/i.test(value) || (/^-?\d+$/.test(value) && Number(value) !== 0))

/** A folder with a `.git`: the work tree's top, or why git refuses it (`refusal`, `owner` to confirm). */
interface Found {
  readonly top: string
  readonly refusal?: string | undefined
  readonly owner?: number | undefined
}

/**
 * Whether `gitDir` is a repository as git's `is_git_directory` sees it: a `HEAD` file, and `objects`
 * and `refs` in its common folder (a linked worktree's `commondir`).
 */
const isGitDirectory = (gitDir: string): boolean => {
  if (!NodeFs.statSync(NodePath.join(gitDir, "HEAD"), { throwIfNoEntry: false })?.isFile()) return false
  const commonFile = NodePath.join(gitDir, "commondir")
  const common = NodeFs.existsSync(commonFile)
    ? NodePath.resolve(gitDir, NodeFs.readFileSync(commonFile, "utf8").trim())
    : gitDir
  return NodeFs.existsSync(NodePath.join(common, "objects")) && NodeFs.existsSync(NodePath.join(common, "refs"))
}

/** Git's reading of a `.git` file (a linked worktree's or a submodule's): the repository it names, or why none. */
const gitFileTarget = (dotGit: string): { readonly gitDir: string } | { readonly refusal: string } => {
  const text = NodeFs.readFileSync(dotGit, "utf8")
  if (!text.startsWith("gitdir: ")) return { refusal: `${dotGit} is not a git file (git expects "gitdir: <path>")` }
  const gitDir = NodePath.resolve(NodePath.dirname(dotGit), text.slice("gitdir: ".length).trimEnd())
  return isGitDirectory(gitDir) ? { gitDir } : { refusal: `${dotGit} names ${gitDir}, which is not a git repository` }
}

/** Git's user for ownership checks: the effective user, or `SUDO_UID` for root. */
const currentUser = (env: NodeJS.ProcessEnv): number | undefined => {
  const uid = process.geteuid?.()
  if (uid !== 0 || env.SUDO_UID === undefined || !/^\d+$/.test(env.SUDO_UID)) return uid
  return Number(env.SUDO_UID)
}

/**
 * The owner git objects to in a work tree: of its `.git` (`dotGit`, the link's own when it is a
 * symbolic link: git reads owners with `lstat`) or of one of `paths` (the top folder, the
 * repository a `.git` file names) when not the current user; git refuses such a repository unless
 * `safe.directory` trusts it.
 */
const foreignOwner = (dotGit: NodeFs.Stats, paths: ReadonlyArray<string>, env: NodeJS.ProcessEnv) => {
  const user = currentUser(env)
  if (user === undefined) return undefined
  if (dotGit.uid !== user) return dotGit.uid
  for (const path of paths) {
    const owner = NodeFs.lstatSync(path, { throwIfNoEntry: false })?.uid
    if (owner !== undefined && owner !== user) return owner
  }
  return undefined
}

const workTreeAt = (folder: string, env: NodeJS.ProcessEnv): Found | undefined => {
  const dotGit = NodePath.join(folder, ".git")
  const link = NodeFs.lstatSync(dotGit, { throwIfNoEntry: false })
  const stat = link?.isSymbolicLink() ? NodeFs.statSync(dotGit, { throwIfNoEntry: false }) : link
  if (link === undefined || stat === undefined) return undefined
  if (stat.isDirectory()) {
    if (!NodeFs.existsSync(NodePath.join(dotGit, "HEAD"))) return undefined
    return { top: folder, owner: foreignOwner(link, [folder], env) }
  }
  if (!stat.isFile()) return undefined
  const target = gitFileTarget(dotGit)
  if ("refusal" in target) return { top: folder, refusal: target.refusal }
  return { top: folder, owner: foreignOwner(link, [folder, target.gitDir], env) }
}

/**
 * The top folder of the git work tree holding `dir`, found as git finds it: the nearest folder, from
 * `dir`'s real path up, with a `.git` folder holding `HEAD` or a `.git` file (a linked worktree's or a
 * submodule's), not going up into a folder `GIT_CEILING_DIRECTORIES` names nor onto another file
 * system unless `GIT_DISCOVERY_ACROSS_FILESYSTEM` is true. Read from the file system rather than by
 * `git rev-parse --show-toplevel`, so that every command (`runs` and `status` run no git otherwise)
 * gets it for a few system calls. `GIT_DIR` and `GIT_WORK_TREE` are not read: corral's git commands
 * drop them. `undefined` outside a work tree; a `refusal` where git stops with an error (a `.git`
 * file naming no repository), an `owner` where it may (another user's repository).
 */
const workTreeTop = (dir: string, env: NodeJS.ProcessEnv): Found | undefined => {
  const start = realPath(dir)
  if (start === undefined) return undefined
  const ceilings = ceilingDirectories(env.GIT_CEILING_DIRECTORIES)
  const device = gitBoolean(env.GIT_DISCOVERY_ACROSS_FILESYSTEM) ? undefined : NodeFs.statSync(start).dev
  for (let current = start; ; ) {
    const found = workTreeAt(current, env)
    if (found !== undefined) return found
    const parent = NodePath.dirname(current)
    if (parent === current || ceilings.has(parent)) return undefined
    if (device !== undefined && NodeFs.statSync(parent).dev !== device) return undefined
    current = parent
  }
}

/**
 * Whether git takes another user's repository at `top`: only `safe.directory` in git's own
 * configuration (system, global, `-c`, `GIT_CONFIG_*`) says so, so git is asked — on this path only.
 */
const gitTrusts = (top: string): boolean => {
  const { GIT_DIR: _dir, GIT_WORK_TREE: _tree, ...env } = process.env
  return spawnSync("git", ["rev-parse", "--git-dir"], { cwd: top, env, stdio: "ignore" }).status === 0
}

/** Why git refuses the work tree it found (exit 2), or nothing. */
const refused = (found: Found) => {
  if (found.refusal !== undefined) {
    return invalidInput(`git refuses the work tree at ${found.top}: ${found.refusal}; fix or remove that file`)
  }
  if (found.owner !== undefined && !gitTrusts(found.top)) {
    return invalidInput(
      `git refuses the repository at ${found.top}: it is owned by another user (uid ${found.owner}); if you trust it: git config --global --add safe.directory ${found.top}`
    )
  }
  return Effect.void
}

/** The default state folder, `<top>/.corral`, or why git refuses the work tree holding `root`. */
const defaultStateDir = (root: string) => {
  const found = workTreeTop(root, process.env)
  if (found === undefined) return Effect.succeed(NodePath.join(root, ".corral"))
  return Effect.as(refused(found), NodePath.join(found.top, ".corral"))
}

/** The walk-up's refusals, for a state folder `--state-dir` or `CORRAL_HOME` named (no walk-up ran). */
const acceptedByGit = (root: string) =>
  Effect.suspend(() => {
    const found = workTreeTop(root, process.env)
    return found === undefined ? Effect.void : refused(found)
  })

/**
 * Resolves and checks the repository folder and the state directory. The repository stays the
 * folder given (the agents' worktrees are of its whole work tree either way); the default state
 * folder is that work tree's top, so that runs started from any of its subfolders share one ledger
 * and one claim table, as git shares one repository.
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolve = (repo: Option.Option<string>, stateDir: Option.Option<string>) =>
  Effect.gen(function* () {
    const root = NodePath.resolve(Option.getOrElse(repo, () => process.cwd()))
    if (!NodeFs.existsSync(root) || !NodeFs.statSync(root).isDirectory()) {
      return yield* invalidInput(`--repo ${root}: not a directory`)
    }
    const state = Option.isSome(stateDir) ? stateDir.value : (process.env.CORRAL_HOME ?? (yield* defaultStateDir(root)))
    return { repo: root, stateDir: NodePath.resolve(state) } satisfies Paths
  })

/**
 * A `.gitignore` of `*` in the state folder, so that git never shows it in the user's checkout — also
 * when the run stops before its first workspace adds the folder to `.git/info/exclude`. An existing
 * file is kept; one that cannot be written leaves that exclude entry as the only guard.
 */
const ignoredByGit = (stateDir: string) =>
  Effect.sync(() => {
    try {
      NodeFs.writeFileSync(NodePath.join(stateDir, ".gitignore"), "*\n", { flag: "wx" })
    } catch {
      return
    }
  })

/**
 * Creates the state directory, or says why it cannot be (a file in the way, no permission, a folder
 * that takes no new folders such as `/proc/self`), with a `.gitignore` of `*` in it when corral
 * creates it: a folder that exists already (`--state-dir` naming one of the user's) is not written to.
 *
 * @since 0.1.0
 * @category resolving
 */
export const makeStateDir = (stateDir: string) =>
  Effect.suspend(() => {
    const existed = NodeFs.existsSync(stateDir)
    return Folder.make(stateDir).pipe(
      Effect.catch((error) =>
        invalidInput(
          `cannot create the state folder ${stateDir}: ${error.path === stateDir ? error.reason : error.message}; choose another with --state-dir or CORRAL_HOME`
        )
      ),
      Effect.andThen(existed ? Effect.void : ignoredByGit(stateDir))
    )
  })

/**
 * Whether the work tree's `HEAD` names a branch with no commit yet (`git init` without a commit), read
 * from git's files, not by one more git command before every run: `HEAD` a symbolic ref whose branch
 * is neither a loose ref nor in `packed-refs`. Anything it cannot read (a reftable repository,
 * `GIT_DIR` elsewhere) counts as born: the run's own `rev-parse HEAD` decides then.
 */
const headUnborn = (root: string, commonDir: string): boolean => {
  try {
    const dotGit = NodePath.join(root, ".git")
    const gitDir = NodeFs.statSync(dotGit).isFile()
      ? NodePath.resolve(
          root,
          NodeFs.readFileSync(dotGit, "utf8")
            .replace(/^gitdir:\s*/, "")
            .trim()
        )
      : dotGit
    const head = NodeFs.readFileSync(NodePath.join(gitDir, "HEAD"), "utf8").trim()
    if (!head.startsWith("ref: ") || NodeFs.existsSync(NodePath.join(commonDir, "reftable"))) return false
    const ref = head.slice("ref: ".length)
    if (NodeFs.existsSync(NodePath.join(commonDir, ref))) return false
    const packed = NodePath.join(commonDir, "packed-refs")
    return !(NodeFs.existsSync(packed) && NodeFs.readFileSync(packed, "utf8").includes(` ${ref}\n`))
  } catch {
    return false
  }
}

/**
 * Checks that `repo` is in a git work tree with a commit, before a worktree run writes anything: the
 * message says what to do instead. First the refusals of the state folder's walk-up (a `.git` file
 * naming no repository, another user's repository), which a `--state-dir` or `CORRAL_HOME` skipped,
 * so they are said in corral's words rather than git's. The lookup is the one the run's workspaces
 * make (cached: no extra git command).
 *
 * @since 0.1.0
 * @category resolving
 */
export const checkWorkTree = (repo: string) =>
  Effect.andThen(acceptedByGit(repo), Workspace.locate(repo)).pipe(
    Effect.flatMap(({ root, commonDir }) =>
      headUnborn(root, commonDir) ? invalidInput(notARepository(root)) : Effect.void
    ),
    Effect.catchTag("NotAGitRepository", () =>
      Effect.flatMap(
        Effect.sync(
          () => NodeFs.existsSync(NodePath.join(repo, "HEAD")) && NodeFs.existsSync(NodePath.join(repo, "objects"))
        ),
        (bare) =>
          invalidInput(
            bare
              ? `${repo} is a bare repository: agents' worktrees need a checkout; clone it and run corral in the clone, or use --isolation directory or none`
              : notARepository(repo)
          )
      )
    ),
    Effect.catchTags({
      GitError: (error) => invalidInput(error.message),
      GitNotFound: (error) => invalidInput(error.message),
      DiskFull: (error) => invalidInput(error.message),
      WorkspaceIoError: (error) => invalidInput(error.message)
    })
  )

/**
 * The message for a folder outside a git repository (or in one without a commit), with what to do instead
 * (by default, for `corral run` under `isolation: worktree`).
 *
 * @since 0.1.0
 * @category resolving
 */
export const notARepository = (
  path: string,
  instead = "use --isolation directory or none, or run git init and commit"
) => `${path} is not inside a git repository with at least one commit; ${instead}`

/**
 * A run id that sorts by start time: `20261125-231816-k3f9`.
 *
 * @since 0.1.0
 * @category resolving
 */
export const newRunId = (): string => {
  const iso = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)
  return `${iso}-${Math.random().toString(36).slice(2, 6)}`
}
