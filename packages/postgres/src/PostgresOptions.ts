/**
 * Options a Postgres-backed corral service cannot use, found before it connects: the pool's
 * `maxConnections` and `connectTimeout`, `PostgresLiveness`'s intervals, and `@corral/cluster`'s
 * runner and coordinator settings. effect's `Duration` refuses strings it cannot parse with a bare
 * `Invalid Input`, reads `NaN` as 0 and takes negative durations, and the driver's pool waits for
 * ever with `maxConnections: 0` or `NaN`; these checks name the module and the option instead.
 * `PostgresLocks` checks its lease timing with `LeaseTables.checkTiming`.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

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

const show = (value: unknown): string =>
  typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value))

/**
 * `input` in milliseconds; dies with {@link InvalidOption} unless it is a finite duration above 0
 * (`positive`) or of at least 0.
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
    const fail = (reason: string) => Effect.die(new InvalidOption({ module, option, reason }))
    if (typeof input === "number" && Number.isNaN(input)) return fail("must be a number of milliseconds, got NaN")
    const parsed = Duration.fromInput(input)
    if (parsed._tag === "None")
      return fail(`expected a duration such as "30 seconds" or a number of milliseconds, got ${show(input)}`)
    const ms = Duration.toMillis(parsed.value)
    if (positive && !(ms > 0 && Number.isFinite(ms)))
      return fail(`must be a positive, finite duration, got ${show(input)}`)
    if (!positive && !(ms >= 0 && Number.isFinite(ms)))
      return fail(`must be finite and not negative, got ${show(input)}`)
    return Effect.succeed(ms)
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
