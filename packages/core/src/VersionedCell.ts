/**
 * A value updated optimistically: read it with its version, compute, and write only if nobody
 * wrote in between; on a conflict, retry with exponential backoff, and fail with `ConflictError`
 * after a number of attempts. For agents that update shared state (a summary, a task list)
 * without holding a lock for their whole run.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { millis } from "./DurationOption.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Versioned<A> {
  readonly value: A
  readonly version: number
}

/**
 * Every attempt found the cell changed by someone else.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConflictError extends Data.TaggedError("ConflictError")<{
  readonly attempts: number
  readonly version: number
}> {
  override get message() {
    return `the value changed under ${this.attempts === 1 ? "its only attempt" : `every one of ${this.attempts} attempts`} (now at version ${this.version})`
  }
}

/**
 * An `update` option that cannot be used (a `backoff` that is not a non-negative duration, an
 * `attempts` that is not a whole number of at least 1). `update` dies with it when run, before
 * `f` is called.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  readonly option: "attempts" | "backoff"
  readonly reason: string
}> {
  override get message() {
    return `VersionedCell.update ${this.option}: ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface VersionedCell<A> {
  readonly get: Effect.Effect<Versioned<A>>
  /** Writes `value` if the cell is still at `version`; `true` when it did. */
  readonly compareAndSet: (version: number, value: A) => Effect.Effect<boolean>
  /**
   * Reads, applies `f` (which may be effectful, e.g. an LLM call) and writes, retrying on conflict:
   * up to `attempts` times (default 5), waiting `backoff` (default 10 ms) doubled after each
   * conflict. Invalid options die with `InvalidOption`.
   */
  readonly update: <E, R>(
    f: (current: A) => Effect.Effect<A, E, R>,
    options?: { readonly attempts?: number | undefined; readonly backoff?: Duration.Input | undefined }
  ) => Effect.Effect<Versioned<A>, E | ConflictError, R>
}

/**
 * @example
 * ```ts
 * import { VersionedCell } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const summary = VersionedCell.make("")
 * const program = summary.update((text) => Effect.succeed(text + "\n- parser: done"), { attempts: 5 })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = <A>(initial: A): VersionedCell<A> => {
  let current: Versioned<A> = { value: initial, version: 0 }
  const get = Effect.sync(() => current)
  const compareAndSet = (version: number, value: A) =>
    Effect.sync(() => {
      if (current.version !== version) return false
      current = { value, version: version + 1 }
      return true
    })
  const update = <E, R>(
    f: (value: A) => Effect.Effect<A, E, R>,
    options: { readonly attempts?: number | undefined; readonly backoff?: Duration.Input | undefined } = {}
  ): Effect.Effect<Versioned<A>, E | ConflictError, R> => {
    const attempts = options.attempts ?? 5
    if (!Number.isInteger(attempts) || attempts < 1) {
      return Effect.die(
        new InvalidOption({ option: "attempts", reason: `must be a whole number of at least 1, got ${attempts}` })
      )
    }
    const backoff = millis(options.backoff ?? 10)
    if (Result.isFailure(backoff)) return Effect.die(new InvalidOption({ option: "backoff", reason: backoff.failure }))
    const base = backoff.success!
    const attempt = (n: number): Effect.Effect<Versioned<A>, E | ConflictError, R> =>
      Effect.gen(function* () {
        const seen = current
        const next = yield* f(seen.value)
        if (yield* compareAndSet(seen.version, next)) return current
        if (n >= attempts) return yield* new ConflictError({ attempts, version: current.version })
        yield* Effect.sleep(base * 2 ** (n - 1))
        return yield* attempt(n + 1)
      })
    return attempt(1)
  }
  return { get, compareAndSet, update }
}
