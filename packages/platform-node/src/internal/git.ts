import { existsSync, readFileSync } from "node:fs"
import * as NodePath from "node:path"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { execCommand, sharedHelper } from "./spawnHelper.ts"

export class GitError extends Data.TaggedError("GitError")<{
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly exitCode: number
  readonly stderr: string
  /** What corral found out about the failure beyond git's own words. */
  readonly hint?: string | undefined
}> {
  override get message() {
    return `git ${this.args.join(" ")} failed in ${this.cwd} (exit ${this.exitCode}): ${this.detail}`
  }
  /** git's standard error, then corral's {@link hint}. */
  get detail(): string {
    const said = this.stderr.trim() || "no output"
    return this.hint === undefined ? said : `${said}\n${this.hint}`
  }
  get isLockContention(): boolean {
    return lockPattern.test(this.stderr) && !this.stderr.includes("but expected")
  }
  /**
   * The administrative name (`.git/worktrees/<name>`) of a worktree whose HEAD still holds the
   * placeholder that `git worktree add` writes before it sets the real HEAD in a child process, when
   * that is what made the command fail: every command that walks the HEADs of all worktrees (`fetch`'s
   * connectivity check, `rev-list --all`, `gc`) dies on it meanwhile.
   */
  get halfAddedWorktree(): string | undefined {
    return halfAddedPattern.exec(this.stderr)?.[1]
  }
  /**
   * Whether the command failed because another process was adding or removing a worktree of the
   * repository meanwhile: a placeholder HEAD ({@link halfAddedWorktree}), a `commondir` or `locked`
   * file of `.git/worktrees/<name>` that `git worktree add` created and had not filled yet, or that
   * folder deleted by `git worktree remove` while the command read it.
   */
  get isWorktreeInFlux(): boolean {
    return this.halfAddedWorktree !== undefined || worktreeInFluxPattern.test(this.stderr)
  }
}

export class GitNotFound extends Data.TaggedError("GitNotFound")<{ readonly cwd: string }> {
  override get message() {
    return `the git executable was not found on PATH (needed in ${this.cwd}); install git 2.38 or newer`
  }
}

export class DiskFull extends Data.TaggedError("DiskFull")<{
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    return `no space left on the device holding ${this.path}: ${this.detail.trim()}`
  }
}

export type GitFailure = GitError | GitNotFound | DiskFull

export interface GitOptions {
  readonly cwd: string
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly okExitCodes?: ReadonlyArray<number> | undefined
  /**
   * Retry while another git process holds a lock or adds or removes a worktree (see
   * {@link GitError.isWorktreeInFlux}); `false` where the caller retries with {@link retryLockedWith}.
   * @default true
   */
  readonly retryOnLock?: boolean | undefined
  /** Written to git's standard input (for `--stdin` commands). */
  readonly input?: string | undefined
  /** A command prefix to run git through (`git` and its arguments are appended): an overlay workspace's mount. */
  readonly via?: ReadonlyArray<string> | undefined
}

export interface GitOutput {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
}

/** A running count of git commands and the wall time their processes took. */
export interface GitTally {
  commands: number
  millis: number
}

export const makeTally = (): GitTally => ({ commands: 0, millis: 0 })

/** The tally that git commands run by the current fiber add to (none by default). */
export const CurrentGitTally = Context.Reference<GitTally | undefined>("@corral/platform-node/Git/CurrentTally", {
  defaultValue: () => undefined
})

const lockPattern =
  /\.lock'?: File exists|Unable to create '.*\.lock'|cannot lock ref|could not lock config file|is locked/i
const halfAddedPattern = /bad object worktrees\/([^/\s]+)\/HEAD/
const worktreeInFluxPattern =
  /Invalid path '[^']*\/worktrees\/[^'/]+'|failed to read '?[^'\s]*\/worktrees\/[^'/\s]+\/(?:commondir|locked|gitdir)/
const diskFullPattern = /No space left on device|ENOSPC|disk quota exceeded/i

const redirectingVariables = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR"]

const baseEnv = (): Record<string, string | undefined> => {
  const env: Record<string, string | undefined> = { ...process.env, LC_ALL: "C", GIT_TERMINAL_PROMPT: "0" }
  for (const name of redirectingVariables) delete env[name]
  return env
}

export const corralIdentity = [
  "-c",
  "user.name=corral",
  "-c",
  "user.email=corral@localhost",
  "-c",
  "commit.gpgsign=false"
] as const

const globalArgs = [
  "-c",
  "gc.auto=0",
  "-c",
  "maintenance.auto=false",
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "advice.detachedHead=false"
]

const spawnGit = (args: ReadonlyArray<string>, options: GitOptions) =>
  Effect.flatMap(Effect.service(CurrentGitTally), (tally) =>
    Effect.tap(spawnTallied(args, options, tally), () => warnFallbackOnce)
  )

let warnedFallback = false

/** Says once per process why git runs without the spawn helper (not when it was turned off). */
const warnFallbackOnce = Effect.suspend(() => {
  const reason = sharedHelper().unavailable
  if (warnedFallback || reason === undefined || process.env.CORRAL_SPAWN_HELPER === "0") return Effect.void
  warnedFallback = true
  return Effect.logWarning(`git commands are started by this process from now on; ${reason}`)
})

const spawnTallied = (args: ReadonlyArray<string>, options: GitOptions, tally: GitTally | undefined) =>
  Effect.suspend(() => {
    const started = performance.now()
    if (tally !== undefined) tally.commands++
    const request = {
      file: options.via === undefined ? "git" : options.via[0]!,
      args:
        options.via === undefined ? [...globalArgs, ...args] : [...options.via.slice(1), "git", ...globalArgs, ...args],
      cwd: options.cwd,
      env: { ...baseEnv(), ...options.env },
      input: options.input,
      maxBuffer: 256 * 1024 * 1024
    }
    return execCommand(sharedHelper(), request, (error, stdout, stderr): Effect.Effect<GitOutput, GitNotFound> => {
      if (tally !== undefined) tally.millis += performance.now() - started
      const code = error?.code
      if (code === "ENOENT" && stderr === "" && existsSync(options.cwd)) {
        return Effect.fail(new GitNotFound({ cwd: options.cwd }))
      }
      const exitCode = error === null ? 0 : typeof code === "number" ? code : -1
      const detail =
        code === "ENOENT"
          ? `the folder ${options.cwd} does not exist`
          : code === "EHELPER"
            ? `${error!.message}${stderr === "" ? "" : `: ${stderr}`}`
            : stderr
      return Effect.succeed({ stdout, stderr: detail, exitCode })
    })
  })

const classify = (
  args: ReadonlyArray<string>,
  options: GitOptions,
  out: GitOutput
): Effect.Effect<GitOutput, GitFailure> => {
  if (out.exitCode === 0 || options.okExitCodes?.includes(out.exitCode)) return Effect.succeed(out)
  if (diskFullPattern.test(out.stderr)) return Effect.fail(new DiskFull({ path: options.cwd, detail: out.stderr }))
  return Effect.fail(new GitError({ args, cwd: options.cwd, exitCode: out.exitCode, stderr: out.stderr }))
}

const lockRetry = Schedule.exponential("25 millis", 1.6).pipe(Schedule.jittered, Schedule.upTo({ times: 12 }))

/** A placeholder HEAD lasts one child process of `git worktree add`, a vanishing folder one `remove`: ≈ 2.5 s of retries in all. */
const worktreeFluxRetry = Schedule.exponential("10 millis", 2).pipe(Schedule.jittered, Schedule.upTo({ times: 8 }))

const isWorktreeInFlux = (error: GitFailure): error is GitError => error._tag === "GitError" && error.isWorktreeInFlux

const isHalfAdded = (error: GitFailure): error is GitError =>
  error._tag === "GitError" && error.halfAddedWorktree !== undefined

/**
 * The worktree folder behind `.git/worktrees/<name>` (its `gitdir` file names the worktree's `.git`),
 * or that administrative folder when git cannot tell.
 */
const worktreeFolder = (cwd: string, name: string) =>
  spawnGit(["rev-parse", "--path-format=absolute", "--git-common-dir"], { cwd }).pipe(
    Effect.map((out) => {
      const admin = NodePath.join(out.stdout.trim(), "worktrees", name)
      try {
        return NodePath.dirname(readFileSync(NodePath.join(admin, "gitdir"), "utf8").trim())
      } catch {
        return admin
      }
    })
  )

/** Names the worktree that still holds `git worktree add`'s placeholder HEAD once the retries gave up. */
const explainHalfAdded = (options: GitOptions) => (error: GitError) =>
  worktreeFolder(options.cwd, error.halfAddedWorktree!).pipe(
    Effect.flatMap((folder) =>
      Effect.fail(
        new GitError({
          ...error,
          hint:
            `the worktree ${folder} has no commit in its HEAD: a \`git worktree add\` there is still running or ` +
            `was killed midway; once no git process works there, remove it with \`git worktree remove --force --force ${folder}\``
        })
      )
    ),
    Effect.catchTag("GitNotFound", () => Effect.fail(error))
  )

/**
 * Runs git and returns its full output; fails unless the exit code is 0 or listed in `okExitCodes`.
 * Retries while another git process holds a lock or adds or removes a worktree of the repository (see
 * {@link GitError.isWorktreeInFlux}), unless `retryOnLock` is `false`.
 */
export const gitOutput = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<GitOutput, GitFailure> =>
  spawnGit(args, options).pipe(
    Effect.flatMap((out) => classify(args, options, out)),
    Effect.retry({
      schedule: lockRetry,
      while: (e) => options.retryOnLock !== false && e._tag === "GitError" && e.isLockContention
    }),
    Effect.retry({ schedule: worktreeFluxRetry, while: (e) => options.retryOnLock !== false && isWorktreeInFlux(e) }),
    Effect.catchIf(isHalfAdded, explainHalfAdded(options))
  )

/**
 * Retries `effect` while it fails because another git process holds a lock or adds or removes a
 * worktree, running `cleanup` after each failure for which `shouldClean` holds (every failure by
 * default).
 */
export const retryLockedWith = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  cleanup: Effect.Effect<void, never, R>,
  shouldClean: (error: E) => boolean = () => true
): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.tapError((error) => (shouldClean(error) ? cleanup : Effect.void)),
    Effect.retry({
      schedule: lockRetry,
      while: (e) => e instanceof GitError && (e.isLockContention || e.isWorktreeInFlux)
    })
  )

/** Runs git and returns stdout without the trailing newline. */
export const git = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<string, GitFailure> =>
  gitOutput(args, options).pipe(Effect.map((out) => out.stdout.replace(/\n$/, "")))

/** Runs git and reports whether it exited with 0 (any other listed exit code means `false`). */
export const gitTest = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<boolean, GitFailure> =>
  gitOutput(args, { ...options, okExitCodes: [1] }).pipe(Effect.map((out) => out.exitCode === 0))

export const lines = (text: string): Array<string> => text.split("\n").filter((line) => line.length > 0)
