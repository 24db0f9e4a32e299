import { Outcome } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import * as ProgressView from "../src/ProgressView.ts"

const progress = {
  total: 2,
  pending: 0,
  waiting: 0,
  running: 2,
  done: 0,
  succeeded: 0,
  failed: 0,
  timedOut: 0,
  interrupted: 0,
  cancelled: 0,
  skipped: 0
}

describe("ProgressView", () => {
  it("the summary's cost includes what running agents reported so far, and each finished agent's total once", () => {
    const view = new ProgressView.ViewState([
      { id: "a", dependsOn: [] },
      { id: "b", dependsOn: [] }
    ])
    const usage = (agentId: string, costUsd: number) =>
      view.apply({ _tag: "Usage", at: 1, agentId, usage: { inputTokens: 1, outputTokens: 1, costUsd } })
    view.apply({ _tag: "Started", runId: "r", at: 0, progress, agentId: "a" })
    view.apply({ _tag: "Started", runId: "r", at: 0, progress, agentId: "b" })
    usage("a", 0.25)
    usage("b", 0.125)
    usage("a", 0.25)
    assert.strictEqual(view.costUsd, 0.625)
    assert.include(ProgressView.summaryLine(view, 10), "$0.625")
    const finished = new Outcome.Succeeded({
      agentId: "a",
      attempts: 1,
      queuedAt: 0,
      startedAt: 0,
      endedAt: 5,
      waitedMs: 0,
      usage: { inputTokens: 2, outputTokens: 2, costUsd: 0.5 },
      value: undefined,
      cached: false
    })
    view.apply({ _tag: "Finished", runId: "r", at: 5, progress, agentId: "a", outcome: finished })
    assert.strictEqual(view.costUsd, 0.625)
    usage("a", 1)
    assert.strictEqual(view.costUsd, 0.625)
    assert.isUndefined(
      ProgressView.plainLine(
        { _tag: "Usage", at: 1, agentId: "b", usage: { inputTokens: 0, outputTokens: 0, costUsd: 1 } },
        0
      )
    )
  })
})
