import { Outcome, Usage } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import * as OutcomeText from "../src/OutcomeText.ts"

const common = { agentId: "a", attempts: 1, queuedAt: 0, startedAt: 0, endedAt: 3000, waitedMs: 0, usage: Usage.zero }

describe("OutcomeText", () => {
  it("words every outcome tag the same way", () => {
    expect(
      ["Succeeded", "Cached", "Failed", "TimedOut", "ClaimTimedOut", "Interrupted", "Cancelled", "Skipped"].map(
        OutcomeText.word
      )
    ).toEqual(["succeeded", "cached", "failed", "timed out", "claim timed out", "interrupted", "cancelled", "skipped"])
  })

  it("describes a timeout in seconds and a failure with its message", () => {
    expect(OutcomeText.describe(new Outcome.TimedOut({ ...common, afterMs: 3000 }))).toBe("timed out after 3.0s")
    expect(
      OutcomeText.describe(new Outcome.Failed({ ...common, error: "x", defect: false, message: "exit code 1" }))
    ).toBe("failed: exit code 1")
  })
})
