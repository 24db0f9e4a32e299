/**
 * Duration options of platform-node's services and processes (lease timing, `killGrace`, ledger
 * flush intervals), read in milliseconds or refused with the reason. Core's own check of run
 * options is internal to `@corral/core`, so this is its counterpart here: effect's `Duration.fromInput`
 * refuses strings it cannot parse and reads `NaN` as 0, so `NaN`, a negative duration, and (where
 * the option needs it) 0 or an infinite one are refused here.
 */
import * as Duration from "effect/Duration"

/** A value as an error message shows it: numbers as written, the rest as JSON. */
export const show = (value: unknown): string =>
  typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value))

/**
 * `input` in milliseconds, or why the option cannot use it. `positive`: it must be above 0 and
 * finite (an interval something repeats at), else at least 0.
 */
export const durationMillis = (input: Duration.Input, positive: boolean): number | string => {
  if (typeof input === "number" && Number.isNaN(input)) return "must be a number of milliseconds, got NaN"
  const duration = Duration.fromInput(input)
  if (duration._tag === "None")
    return `expected a duration such as "30 seconds" or a number of milliseconds, got ${show(input)}`
  const ms = Duration.toMillis(duration.value)
  if (positive) return ms > 0 && Number.isFinite(ms) ? ms : `must be a positive, finite duration, got ${show(input)}`
  return ms >= 0 ? ms : `must not be negative, got ${show(input)}`
}
