/**
 * Generated run ids: `20260101T120000-k3x9a1`, the run's start second (UTC) and six base-36 digits
 * from `Random`.
 *
 * The stamp is computed from the epoch second by integer arithmetic (days to a civil date, the
 * proleptic Gregorian calendar `Date` uses) rather than `new Date(…).toISOString()` and two regular
 * expressions: a run started after an idle wait formats a new second, and that path, cold, cost ≈
 * 30 µs before its first agent started (≈ 10 µs this way). Seconds outside years 0–9999, whose ISO
 * form has a sign and six year digits, take the `Date` path. The stamp is kept for the second it was
 * made in: nested runs start thousands of times a second.
 */
import type * as Random from "effect/Random"

/** Seconds since the epoch of 0000-01-01T00:00:00Z and of the first second after 9999-12-31T23:59:59Z. */
const firstSecond = -62_167_219_200
const endSecond = 253_402_300_800

/** Days from 0000-03-01 to 1970-01-01. */
const epochDays = 719_468

const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`)

/** `second`'s UTC time as `YYYYMMDDTHHMMSS`, as `Date`'s ISO form without separators and fraction. */
export const stampOf = (second: number): string => {
  if (second < firstSecond || second >= endSecond) {
    return new Date(second * 1000).toISOString().replace(/[-:]/g, "").replace(/\..*$/, "")
  }
  const days = Math.floor(second / 86_400)
  const time = second - days * 86_400
  const shifted = days + epochDays
  const era = Math.floor(shifted / 146_097)
  const dayOfEra = shifted - era * 146_097
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1_460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365
  )
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  const hours = Math.floor(time / 3_600)
  const minutes = Math.floor((time - hours * 3_600) / 60)
  return `${`${year}`.padStart(4, "0")}${two(month)}${two(day)}T${two(hours)}${two(minutes)}${two(time % 60)}`
}

let lastSecond = Number.NaN
let lastStamp = ""

const secondOf = (now: number): string => {
  const second = Math.floor(now / 1000)
  if (second !== lastSecond) {
    lastStamp = stampOf(second)
    lastSecond = second
  }
  return lastStamp
}

/** The random part of a run id, drawn when the run starts (so the draw keeps its place in `Random`'s sequence). */
export const drawRunId = (random: Random.Random): number => Math.floor(random.nextDoubleUnsafe() * (36 ** 6 + 1))

/** The run id of a run started at `now` (milliseconds since the epoch) with the draw `n`. */
export const formatRunId = (now: number, n: number): string => `${secondOf(now)}-${n.toString(36).padStart(6, "0")}`

/** A run id for a run started at `now` (milliseconds since the epoch). */
export const makeRunId = (now: number, random: Random.Random): string => formatRunId(now, drawRunId(random))
