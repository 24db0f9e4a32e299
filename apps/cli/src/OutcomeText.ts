/**
 * One wording for outcomes in every view — the live rows, plain lines, the summary, `corral status`
 * and the agent's log trailer: `timed out after 3.0s`, never `timedout` or `3000ms`.
 *
 * @since 0.1.0
 */
import type * as Outcome from "@corral/core/Outcome"

const words: Readonly<Record<string, string>> = {
  Succeeded: "succeeded",
  Cached: "cached",
  Failed: "failed",
  TimedOut: "timed out",
  ClaimTimedOut: "claim timed out",
  Interrupted: "interrupted",
  Cancelled: "cancelled",
  Skipped: "skipped"
}

/**
 * The word for an outcome tag as the ledger records it (`Cached` for a reused success).
 *
 * @example
 * ```ts
 * import * as OutcomeText from "./OutcomeText.ts"
 *
 * OutcomeText.word("TimedOut") // "timed out"
 * ```
 * @since 0.1.0
 * @category wording
 */
export const word = (tag: string): string => words[tag] ?? tag.toLowerCase()

/**
 * The tag of an outcome, `Cached` for a success reused from an earlier run.
 *
 * @since 0.1.0
 * @category wording
 */
export const tagOf = (outcome: Outcome.Outcome): string =>
  outcome._tag === "Succeeded" && outcome.cached ? "Cached" : outcome._tag

/**
 * A duration as `3.0s`.
 *
 * @since 0.1.0
 * @category wording
 */
export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`

/**
 * What explains an outcome beyond its word: the failure's message, `after 3.0s`, the dependency
 * that was not met, the reason for a stop; empty for a success.
 *
 * @since 0.1.0
 * @category wording
 */
export const detail = (outcome: Outcome.Outcome): string => {
  switch (outcome._tag) {
    case "Succeeded":
      return ""
    case "Failed":
      return outcome.message
    case "TimedOut":
      return `after ${seconds(outcome.afterMs)}`
    case "Skipped":
      return `${outcome.dependency} ${word(outcome.dependencyOutcome)}`
    case "ClaimTimedOut":
      return `after ${seconds(outcome.afterMs)} waiting for ${outcome.blockers.map((b) => `${b.key} held by ${b.holder}`).join(", ")}`
    case "Interrupted":
    case "Cancelled":
      return outcome.reason
  }
}

/**
 * The word and the detail: `timed out after 3.0s`, `failed: exit code 1`.
 *
 * @since 0.1.0
 * @category wording
 */
export const describe = (outcome: Outcome.Outcome): string => {
  const text = detail(outcome)
  if (text.length === 0) return word(tagOf(outcome))
  return outcome._tag === "TimedOut" || outcome._tag === "ClaimTimedOut"
    ? `${word(outcome._tag)} ${text}`
    : `${word(tagOf(outcome))}: ${text}`
}
