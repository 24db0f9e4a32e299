/**
 * A thin Effect wrapper around the git CLI, used by the workspace service.
 *
 * Every command runs with `LC_ALL=C`, without inherited `GIT_DIR`-style variables, with hooks and
 * automatic gc disabled, and retries briefly while another git process holds a lock.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as internal from "./internal/git.ts"

/**
 * A git command exited with an unexpected code. `message` names the command, the folder and stderr.
 *
 * @since 0.1.0
 * @category errors
 */
export const GitError = internal.GitError

/**
 * @since 0.1.0
 * @category errors
 */
export type GitError = internal.GitError

/**
 * The git executable is not installed or not on `PATH`.
 *
 * @since 0.1.0
 * @category errors
 */
export const GitNotFound = internal.GitNotFound

/**
 * @since 0.1.0
 * @category errors
 */
export type GitNotFound = internal.GitNotFound

/**
 * git (or a file copy) reported `ENOSPC` / "No space left on device".
 *
 * @since 0.1.0
 * @category errors
 */
export const DiskFull = internal.DiskFull

/**
 * @since 0.1.0
 * @category errors
 */
export type DiskFull = internal.DiskFull

/**
 * Any failure of a git command.
 *
 * @since 0.1.0
 * @category errors
 */
export type GitFailure = internal.GitFailure

/**
 * Options for {@link run}: the working folder, extra environment, and exit codes that count as success.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = internal.GitOptions

/**
 * Runs `git <args>` in `cwd` and returns stdout without its trailing newline.
 *
 * @example
 * ```ts
 * import { Git } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const head = yield* Git.run(["rev-parse", "HEAD"], { cwd: "/path/to/repo" })
 *   return head.trim()
 * })
 * ```
 * @since 0.1.0
 * @category commands
 */
export const run: (args: ReadonlyArray<string>, options: Options) => Effect.Effect<string, GitFailure> = internal.git

/**
 * Runs a git predicate such as `merge-base --is-ancestor`: exit 0 is `true`, exit 1 is `false`.
 *
 * @example
 * ```ts
 * import { Git } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const merged = yield* Git.test(["merge-base", "--is-ancestor", "feature", "main"], { cwd: "/path/to/repo" })
 *   return merged
 * })
 * ```
 * @since 0.1.0
 * @category commands
 */
export const test: (args: ReadonlyArray<string>, options: Options) => Effect.Effect<boolean, GitFailure> =
  internal.gitTest

/**
 * A running count of git commands and the wall time their processes took.
 *
 * @since 0.1.0
 * @category tally
 */
export type Tally = internal.GitTally

/**
 * A fresh tally at zero.
 *
 * @since 0.1.0
 * @category tally
 */
export const makeTally: () => Tally = internal.makeTally

/**
 * The tally every git command run by the current fiber adds to; provide one to measure a piece of work.
 *
 * @example
 * ```ts
 * import { Git } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const repo = "/path/to/repo"
 * const program = Effect.gen(function*() {
 *   const tally = Git.makeTally()
 *   yield* Git.run(["status"], { cwd: repo }).pipe(Effect.provideService(Git.CurrentTally, tally))
 *   return tally // tally.commands === 1
 * })
 * ```
 * @since 0.1.0
 * @category tally
 */
export const CurrentTally = internal.CurrentGitTally
