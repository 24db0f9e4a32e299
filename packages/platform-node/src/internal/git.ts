import { existsSync } from "node:fs"
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
}> {
  override get message() {
    const detail = this.stderr.trim() || "no output"
    return `git ${this.args.join(" ")} failed in ${this.cwd} (exit ${this.exitCode}): ${detail}`
  }
  get isLockContention(): boolean {
    return lockPattern.test(this.stderr) && !this.stderr.includes("but expected")
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
  /** Retry when another git process holds a lock. @default true */
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

/** Runs git and returns its full output; fails unless the exit code is 0 or listed in `okExitCodes`. */
export const gitOutput = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<GitOutput, GitFailure> =>
  spawnGit(args, options).pipe(
    Effect.flatMap((out) => classify(args, options, out)),
    Effect.retry({
      schedule: lockRetry,
      while: (e) => options.retryOnLock !== false && e._tag === "GitError" && e.isLockContention
    })
  )

/**
 * Retries `effect` while it fails because another git process holds a lock, running `cleanup` after
 * each failure for which `shouldClean` holds (every failure by default).
 */
export const retryLockedWith = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  cleanup: Effect.Effect<void, never, R>,
  shouldClean: (error: E) => boolean = () => true
): Effect.Effect<A, E, R> =>
  effect.pipe(
    Effect.tapError((error) => (shouldClean(error) ? cleanup : Effect.void)),
    Effect.retry({ schedule: lockRetry, while: (e) => e instanceof GitError && e.isLockContention })
  )

/** Runs git and returns stdout without the trailing newline. */
export const git = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<string, GitFailure> =>
  gitOutput(args, options).pipe(Effect.map((out) => out.stdout.replace(/\n$/, "")))

/** Runs git and reports whether it exited with 0 (any other listed exit code means `false`). */
export const gitTest = (args: ReadonlyArray<string>, options: GitOptions): Effect.Effect<boolean, GitFailure> =>
  gitOutput(args, { ...options, okExitCodes: [1] }).pipe(Effect.map((out) => out.exitCode === 0))

export const lines = (text: string): Array<string> => text.split("\n").filter((line) => line.length > 0)
