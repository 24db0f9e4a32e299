/**
 * How a command ends with a specific exit code: 1 for a run with failures or conflicts, 2 for
 * invalid input (nothing was started). The message has already been printed.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import * as OutputGuard from "./OutputGuard.ts"

/**
 * @since 0.1.0
 * @category errors
 */
export class CliExit extends Data.TaggedError("CliExit")<{ readonly code: number }> {
  override get [Runtime.errorExitCode](): number {
    return this.code
  }
  override get [Runtime.errorReported](): boolean {
    return false
  }
}

/**
 * Prints `message` to stderr and ends with exit code 2.
 *
 * @since 0.1.0
 * @category constructors
 */
export const invalidInput = (message: string): Effect.Effect<never, CliExit> =>
  Effect.andThen(
    Effect.sync(() => OutputGuard.write(process.stderr, `corral: ${message}\n`)),
    Effect.fail(new CliExit({ code: 2 }))
  )
