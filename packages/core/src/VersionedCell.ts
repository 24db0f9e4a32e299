/**
 * A value updated optimistically: read it with its version, compute, and write only if nobody
 * wrote in between; on a conflict, retry with exponential backoff, and fail with `ConflictError`
 * after a number of attempts. For agents that update shared state (a summary, a task list)
 * without holding a lock for their whole run.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

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
    return `the value changed under every one of ${this.attempts} attempts (now at version ${this.version})`
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
   * Reads, applies `f` (which may be effectful, e.g. an LLM call) and writes, retrying on conflict.
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
    const base = Duration.toMillis(Duration.fromInputUnsafe(options.backoff ?? "10 millis"))
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
