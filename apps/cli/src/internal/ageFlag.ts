/**
 * The age `corral gc --older-than` and `corral discard --older-than` take: a number and one unit
 * (`ms`, `s`, `m`, `h`, `d` or `w`), such as `30m`, `12h` or `7d`. Not a plan file's duration (no
 * weeks there, and a bare number is milliseconds), nor effect's `Duration` text (`"7 days"`): a
 * flag typed at a prompt, read one way by both commands.
 */
import * as Duration from "effect/Duration"

const units = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const

const ageText = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/

/** `text` as an age, or `undefined` when it is not one. */
export const parseAge = (text: string): Duration.Duration | undefined => {
  const match = ageText.exec(text.trim())
  if (match === null) return undefined
  return Duration.millis(Number(match[1]) * units[match[2] as keyof typeof units])
}

/** What both commands say of an `--older-than` they cannot read. */
export const ageIssue = (text: string): string =>
  `--older-than ${text}: expected a number with a unit (ms, s, m, h, d or w), such as 30m, 12h or 7d`
