/**
 * What this machine offers for sandboxed processes (`ProcessSpec.sandbox`): whether bubblewrap is
 * installed and can create the namespaces a sandbox needs. `ProcessRunner.run` checks this itself
 * and refuses to start a sandboxed process without it; call `support` first to fail earlier, for
 * example while validating a plan.
 *
 * @since 0.1.0
 */
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
