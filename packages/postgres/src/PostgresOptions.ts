/**
 * Options a Postgres-backed corral service cannot use, found before it connects: the pool's
 * `maxConnections` and `connectTimeout`, `PostgresLiveness`'s intervals, `OwnerSession`'s `every`,
 * and `@corral/cluster`'s runner, coordinator and registry settings. Durations are read and refused
 * by `@corral/core`'s `DurationOption` (effect's `Duration` refuses strings it cannot parse with a
 * bare `Invalid Input`, reads `NaN` as 0, misreads some objects and takes negative durations), and
 * the driver's pool waits for ever with `maxConnections: 0` or `NaN`; these checks die naming the
 * module and the option instead. `PostgresLocks` checks its lease timing with
 * `LeaseTables.checkTiming` and dies with `LeaseTables.InvalidOption`.
 *
 * @since 0.1.0
 */
import * as DurationOption from "@corral/core/DurationOption"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"

/**
 * An option a service cannot use; building the service dies with it.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  readonly module: string
  readonly option: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.module} ${this.option}: ${this.reason}`
  }
}

/**
 * `input` in milliseconds as `DurationOption` reads it: above 0 and finite when `positive`
 * (`DurationOption.intervalMillis`), else at least 0 with `Infinity` for an infinite duration
 * (`DurationOption.millis`); dies with {@link InvalidOption} naming `module` and `option` with the
 * reason `DurationOption` gives otherwise.
 *
 * @example
 * ```ts
 * import { PostgresOptions } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const every = PostgresOptions.duration("MyService", "every", "2 seconds", true) // Effect of 2000
 * Effect.runSync(every)
 * ```
 * @since 0.1.0
 * @category validation
 */
export const duration = (
  module: string,
  option: string,
  input: Duration.Input,
  positive: boolean
): Effect.Effect<number> =>
  Effect.suspend(() => {
    const ms = positive ? DurationOption.intervalMillis(input) : DurationOption.millis(input)
    return Result.isFailure(ms)
      ? Effect.die(new InvalidOption({ module, option, reason: ms.failure }))
      : Effect.succeed(ms.success)
  })

/**
 * `value` when it is a whole number from `min` to `max`; dies with {@link InvalidOption} otherwise.
 *
 * @example
 * ```ts
 * import { PostgresOptions } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * Effect.runSync(PostgresOptions.wholeNumber("MyService", "capacity", 8, 1)) // 8
 * ```
 * @since 0.1.0
 * @category validation
 */
export const wholeNumber = (
  module: string,
  option: string,
  value: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER
): Effect.Effect<number> =>
  Number.isSafeInteger(value) && value >= min && value <= max
    ? Effect.succeed(value)
    : Effect.die(
        new InvalidOption({
          module,
          option,
          reason: `must be a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? " up" : ` to ${max}`}, got ${show(value)}`
        })
      )

const show = (value: unknown): string =>
  typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value))
