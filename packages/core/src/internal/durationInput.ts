/**
 * Duration inputs from callers (agent and run options, rate limits), read in milliseconds. Some
 * inputs effect's `Duration.fromInput` accepts but reads as something other than what the caller
 * wrote, and these are refused: it reads `NaN` (a number, a tuple part or an object field) as 0, skips
 * object keys it does not know (`{}` and `{ second: 5 }` are 0 ms), and adds object fields with
 * `+` whatever their type (`{ milliseconds: "5" }` is 0.000005 ms, `{ seconds: true }` 1 s).
 * Everything else effect reads as written or refuses, so it is left to effect.
 */
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"

const fields = ["weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "nanoseconds"] as const

const known: ReadonlySet<string> = new Set(fields)

const noMillis: Result.Result<number | undefined, string> = Result.succeed(undefined)

/**
 * A duration input in milliseconds. A whole number of milliseconds (what most timeouts and
 * estimates are) is its own answer, without parsing it as a `Duration`: a run checks up to three
 * per agent before its first agent starts. An input effect would misread (see `misread`) is refused.
 */
export const millis = (input: Duration.Input | undefined): Result.Result<number | undefined, string> => {
  if (input === undefined) return noMillis
  if (typeof input === "number" && Number.isSafeInteger(input) && input >= 0)
    return Result.succeed(input === 0 ? 0 : input)
  if (typeof input === "number" && !Number.isFinite(input) && input > 0) return Result.succeed(Number.POSITIVE_INFINITY)
  // effect reads a string as written or refuses it
  const misreading = typeof input === "string" ? undefined : misread(input)
  if (misreading !== undefined) return Result.fail(misreading)
  const duration = Duration.fromInput(input)
  if (duration._tag === "None")
    return Result.fail(
      `expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got ${show(input)}`
    )
  const ms = Duration.toMillis(duration.value)
  if (Number.isNaN(ms) || ms < 0) return Result.fail(`must not be negative, got ${show(input)}`)
  return Result.succeed(ms)
}

/** Why effect would misread `input`, or `undefined` when it reads it as written (or refuses it). */
export const misread = (input: unknown): string | undefined => {
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
  return given
    ? undefined
    : `expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got ${show(input)}`
}

/** A duration input as a message shows it: JSON where it has one, `NaN` and `5n` as written. */
export const show = (input: unknown): string => {
  if (typeof input === "bigint") return `${input}n`
  if (typeof input === "number") return String(input)
  if (Array.isArray(input)) return `[${input.map(show).join(",")}]`
  try {
    return JSON.stringify(input) ?? String(input)
  } catch {
    return String(input)
  }
}
