/**
 * Duration inputs that effect's `Duration.fromInput` accepts but reads as something other than
 * what the caller wrote: it reads `NaN` (a number, a tuple part or an object field) as 0, skips
 * object keys it does not know (`{}` and `{ second: 5 }` are 0 ms), and adds object fields with
 * `+` whatever their type (`{ milliseconds: "5" }` is 0.000005 ms, `{ seconds: true }` 1 s).
 * Everything else effect reads as written or refuses, so it is left to effect.
 */
import * as Duration from "effect/Duration"

const fields = ["weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "nanoseconds"] as const

const known: ReadonlySet<string> = new Set(fields)

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
