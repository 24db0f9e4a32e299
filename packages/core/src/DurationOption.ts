/**
 * The check of a duration option, read in milliseconds, for every corral package that takes one
 * (run and agent options, rate limits, model providers, and platform-node's lease timing, `killGrace`
 * and ledger intervals). Some inputs effect's `Duration.fromInput` accepts but reads as something
 * other than what the caller wrote, and these are refused: it reads `NaN` (a number, a tuple part,
 * an object field, or object fields adding up to `Infinity - Infinity`) as 0, skips object keys it
 * does not know (`{}` and `{ second: 5 }` are 0 ms), and adds object fields with `+` whatever their
 * type (`{ milliseconds: "5" }` is 0.000005 ms, `{ seconds: true }` 1 s). Everything else effect
 * reads as written or refuses, so it is left to effect. A refusal is the reason as text: the caller puts it in its own tagged error, which names
 * its module and the option.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"

const fields = ["weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "nanoseconds"] as const

const known: ReadonlySet<string> = new Set(fields)

const noMillis: Result.Result<number | undefined, string> = Result.succeed(undefined)

/**
 * A whole number of milliseconds (at least 0) as `millis` reads it, else `undefined`: the answer of
 * `millis` without its `Result`, for a caller that checks many durations.
 *
 * @internal
 */
export const wholeMillis = (input: unknown): number | undefined =>
  typeof input === "number" && Number.isSafeInteger(input) && input >= 0 ? (input === 0 ? 0 : input) : undefined

/**
 * A duration input in milliseconds (at least 0, `Infinity` for an infinite duration), or why it
 * cannot be read as the caller meant it; `undefined` (an option not given) is its own answer. A
 * whole number of milliseconds (what most timeouts and estimates are) is its own answer, without
 * parsing it as a `Duration`: a run checks up to three per agent before its first agent starts.
 *
 * @example
 * ```ts
 * import { DurationOption } from "@corral/core"
 * import { Result } from "effect"
 *
 * const ok = DurationOption.millis("2 seconds") // Result.succeed(2000)
 * const refused = DurationOption.millis({ seconds: true } as never)
 * if (Result.isFailure(refused)) console.log(`killGrace: ${refused.failure}`)
 * // killGrace: duration field seconds must be a number, got boolean
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export function millis(input: Duration.Input): Result.Result<number, string>
export function millis(input: Duration.Input | undefined): Result.Result<number | undefined, string>
export function millis(input: Duration.Input | undefined): Result.Result<number | undefined, string> {
  if (input === undefined) return noMillis
  const whole = wholeMillis(input)
  if (whole !== undefined) return Result.succeed(whole)
  if (typeof input === "number" && !Number.isFinite(input) && input > 0) return Result.succeed(Number.POSITIVE_INFINITY)
  const ms = read(input)
  if (Result.isFailure(ms) || ms.success >= 0) return ms
  return Result.fail(`must not be negative, got ${show(input)}`)
}

/**
 * A duration input in milliseconds that must be above 0 and finite (an interval something repeats
 * at, a lease's time to live), or why it cannot be one; misread inputs are refused as {@link millis} refuses them.
 *
 * @example
 * ```ts
 * import { DurationOption } from "@corral/core"
 *
 * DurationOption.intervalMillis("100 millis") // Result.succeed(100)
 * DurationOption.intervalMillis(0) // Result.fail("must be a positive, finite duration, got 0")
 * ```
 *
 * @since 0.1.0
 * @category checks
 */
export const intervalMillis = (input: Duration.Input): Result.Result<number, string> => {
  const ms = read(input)
  if (Result.isFailure(ms) || (ms.success > 0 && Number.isFinite(ms.success))) return ms
  return Result.fail(`must be a positive, finite duration, got ${show(input)}`)
}

/** `input` in milliseconds as effect reads it (negative ones too), unless effect would misread or refuse it. */
const read = (input: Duration.Input): Result.Result<number, string> => {
  // effect reads a string as written or refuses it
  const misreading = typeof input === "string" ? undefined : misread(input)
  if (misreading !== undefined) return Result.fail(misreading)
  const duration = Duration.fromInput(input)
  if (duration._tag === "None")
    return Result.fail(
      `expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got ${show(input)}`
    )
  return Result.succeed(Duration.toMillis(duration.value))
}

/** Why effect would misread `input`, or `undefined` when it reads it as written (or refuses it). */
const misread = (input: unknown): string | undefined => {
  if (typeof input === "number") return Number.isNaN(input) ? "must be a number of milliseconds, got NaN" : undefined
  if (typeof input !== "object" || input === null || Duration.isDuration(input)) return undefined
  if (Array.isArray(input)) return misreadTuple(input)
  return misreadObject(input as Readonly<Record<string, unknown>>)
}

const misreadTuple = (input: ReadonlyArray<unknown>): string | undefined =>
  input.length === 2 && input.some((part) => typeof part === "number" && Number.isNaN(part))
    ? `expected [seconds, nanoseconds] as two numbers, got ${show(input)}`
    : undefined

const misreadObject = (input: Readonly<Record<string, unknown>>): string | undefined => {
  for (const key of Object.keys(input)) {
    if (!known.has(key)) return `unknown duration field ${JSON.stringify(key)} (known: ${fields.join(", ")})`
  }
  let given = false
  for (const field of fields) {
    const value = input[field]
    if (value === undefined) continue
    if (typeof value !== "number" || Number.isNaN(value)) {
      return `duration field ${field} must be a number, got ${value === null ? "null" : typeof value === "number" ? "NaN" : typeof value}`
    }
    given = true
  }
  if (!given)
    return `expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got ${show(input)}`
  const values = fields.map((field) => input[field])
  return values.includes(Number.POSITIVE_INFINITY) && values.includes(Number.NEGATIVE_INFINITY)
    ? `duration fields add up to Infinity - Infinity, which is no duration, got ${show(input)}`
    : undefined
}

/** A duration input as a message shows it: JSON where it has one, `NaN`, `Infinity` and `5n` as written. */
const show = (input: unknown): string => {
  if (typeof input === "bigint") return `${input}n`
  if (typeof input === "number") return String(input)
  if (Array.isArray(input)) return `[${input.map(show).join(",")}]`
  if (isPlainObject(input))
    return `{${Object.entries(input)
      .map(([key, value]) => `${JSON.stringify(key)}:${show(value)}`)
      .join(",")}}`
  try {
    return JSON.stringify(input) ?? String(input)
  } catch {
    return String(input)
  }
}

const isPlainObject = (input: unknown): input is Readonly<Record<string, unknown>> => {
  if (typeof input !== "object" || input === null) return false
  const proto = Object.getPrototypeOf(input)
  return proto === Object.prototype || proto === null
}
