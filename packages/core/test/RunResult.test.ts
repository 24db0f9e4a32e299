import { Outcome, RunResult, Usage } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"

const common = {
  agentId: "a",
  attempts: 1,
  queuedAt: 1,
  startedAt: 2,
  endedAt: 3,
  waitedMs: 1,
  usage: Usage.zero
}

const byTag: { readonly [Tag in Outcome.Tag]: Outcome.Outcome } = {
  Succeeded: new Outcome.Succeeded({ ...common, value: 1, cached: false }),
  Failed: new Outcome.Failed({ ...common, error: "e", defect: false, message: "e" }),
  TimedOut: new Outcome.TimedOut({ ...common, afterMs: 10 }),
  Interrupted: new Outcome.Interrupted({ ...common, reason: "stop", crossedBudget: false }),
  Cancelled: new Outcome.Cancelled({ ...common, startedAt: null, reason: "stop" }),
  Skipped: new Outcome.Skipped({ ...common, dependency: "b", dependencyOutcome: "Failed" }),
  ClaimTimedOut: new Outcome.ClaimTimedOut({ ...common, afterMs: 5, blockers: [] })
}

const tags = Object.keys(byTag) as Array<Outcome.Tag>

const resultOf = (outcomes: ReadonlyArray<Outcome.Outcome>) =>
  new RunResult.RunResult({ runId: "r", outcomes, startedAt: 0, endedAt: 1, stopped: undefined })

describe("RunResult", () => {
  it("allSucceeded is true exactly when every outcome is Succeeded (none: true)", () => {
    assert.isTrue(resultOf([]).allSucceeded)
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...tags), { maxLength: 40 }), (drawn) => {
        const result = resultOf(drawn.map((tag) => byTag[tag]))
        assert.strictEqual(
          result.allSucceeded,
          drawn.every((tag) => tag === "Succeeded")
        )
        assert.strictEqual(result.allSucceeded, result.succeeded.length === drawn.length)
      }),
      { numRuns: 300 }
    )
  })
})
