/**
 * What this machine offers for sandboxed processes (`ProcessSpec.sandbox`): whether bubblewrap is
 * installed and can create the namespaces a sandbox needs. `ProcessRunner.run` checks this itself
 * and refuses to start a sandboxed process without it; call `support` first to fail earlier, for
 * example while validating a plan.
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { SandboxOptions } from "./ProcessRunner.ts"
import * as internal from "./internal/sandbox.ts"

/**
 * The answer of a probe: `available` when `bwrap` ran a sandboxed `true`, `network` when it could also
 * create a network namespace (needed by `network: false`). `detail` says what was found, or what to install.
 *
 * @since 0.1.0
 * @category models
 */
export interface Support {
  readonly available: boolean
  readonly bwrap: string | undefined
  readonly version: string | undefined
  readonly network: boolean
  readonly detail: string
}

/**
 * How to install bubblewrap on common Linux distributions.
 *
 * @since 0.1.0
 * @category models
 */
export const installHint: string = internal.installHint

/**
 * A sandbox was asked for on a machine that cannot provide it.
 *
 * @since 0.1.0
 * @category errors
 */
export class SandboxUnavailable extends Data.TaggedError("SandboxUnavailable")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

/**
 * Probes the machine synchronously: looks up `bwrap` (`CORRAL_BWRAP` or PATH) and runs it once; the
 * answer is cached per executable.
 *
 * @since 0.1.0
 * @category probing
 */
export const supportUnsafe = (): Support => internal.support()

/**
 * The machine's sandbox support, probed once per process.
 *
 * @example
 * ```ts
 * import { Sandbox } from "@corral/platform-node"
 * import { Console, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const support = yield* Sandbox.support
 *   if (!support.available) yield* Console.log(support.detail)
 * })
 * ```
 *
 * @since 0.1.0
 * @category probing
 */
export const support: Effect.Effect<Support> = Effect.sync(supportUnsafe)

/**
 * Succeeds when a sandbox with these options can run here, else fails with `SandboxUnavailable`
 * (whose message names what is missing and how to install it).
 *
 * @since 0.1.0
 * @category probing
 */
export const check = (options: SandboxOptions | boolean = true): Effect.Effect<void, SandboxUnavailable> =>
  Effect.suspend(() => {
    const problem = internal.unsupported(options === true || options === false ? {} : options)
    return problem === undefined ? Effect.void : Effect.fail(new SandboxUnavailable({ detail: problem }))
  })

/**
 * The git folder shared by every worktree of the repository checked out at `dir` (from the
 * worktree's `.git` file, or `dir/.git` itself), or `undefined` when there is none: what a sandbox
 * mounts read-only so that git works inside it and the agent cannot change the repository.
 *
 * @since 0.1.0
 * @category git
 */
export const commonGitDir = (dir: string): string | undefined => {
  try {
    const dotGit = NodePath.join(dir, ".git")
    if (NodeFs.statSync(dotGit).isDirectory()) return dotGit
    const gitDir = /^gitdir: (.*)$/m.exec(NodeFs.readFileSync(dotGit, "utf8"))?.[1]?.trim()
    if (gitDir === undefined) return undefined
    const absolute = NodePath.resolve(dir, gitDir)
    const common = NodeFs.readFileSync(NodePath.join(absolute, "commondir"), "utf8").trim()
    return NodePath.resolve(absolute, common)
  } catch {
    return undefined
  }
}

/**
 * `[folder]` when `folder` lies strictly inside one of the folders a sandbox shows (`shown`, the
 * root `/` included), else nothing: what to pass as `hide` so that a folder the process must not
 * see (such as corral's state folder) stays out of sight under a wider `allow` path.
 *
 * @since 0.1.0
 * @category paths
 */
export const hideWithin = (folder: string, shown: ReadonlyArray<string>): ReadonlyArray<string> => {
  const target = NodePath.resolve(folder)
  return shown.some((dir) => {
    const relative = NodePath.relative(NodePath.resolve(dir), target)
    const outside = relative === ".." || relative.startsWith(`..${NodePath.sep}`) || NodePath.isAbsolute(relative)
    return relative !== "" && !outside
  })
    ? [target]
    : []
}

/**
 * Watches the worktree's `.git` link of a sandboxed process: `restore` puts back the content it had
 * when `guardGitLink` was called (replacing whatever the process put there) and remembers that it
 * had to; `tampered` says whether it did. `undefined` for folders without a `.git` file. Run git in
 * the worktree only after `restore`: a link to a repository the process made could run its
 * commands there (`core.fsmonitor`, hooks).
 *
 * @since 0.1.0
 * @category git
 */
export const guardGitLink = (
  dir: string
): { readonly file: string; readonly restore: Effect.Effect<void>; readonly tampered: () => boolean } | undefined => {
  const file = NodePath.join(dir, ".git")
  const stat = NodeFs.lstatSync(file, { throwIfNoEntry: false })
  if (stat === undefined || !stat.isFile()) return undefined
  const original = NodeFs.readFileSync(file, "utf8")
  let tampered = false
  const intact = () => {
    const now = NodeFs.lstatSync(file, { throwIfNoEntry: false })
    return now?.isFile() && NodeFs.readFileSync(file, "utf8") === original
  }
  return {
    file,
    restore: Effect.sync(() => {
      if (intact()) return
      tampered = true
      NodeFs.rmSync(file, { recursive: true, force: true })
      NodeFs.writeFileSync(file, original)
    }),
    tampered: () => tampered
  }
}
