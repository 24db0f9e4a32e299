import { describe, expect, it } from "@effect/vitest"
import { criticalPath } from "../../src/internal/ledgerRecord.ts"
import type { AgentRecord, Span } from "../../src/RunRecord.ts"

const agent = (
  agentId: string,
  startedAt: number,
  endedAt: number,
  options: { readonly dependsOn?: ReadonlyArray<string>; readonly spans?: ReadonlyArray<Span> } = {}
): AgentRecord => ({
  agentId,
  dependsOn: options.dependsOn ?? [],
  outcome: "Succeeded",
  detail: "",
  attempts: 1,
  queuedAt: 0,
  startedAt,
  endedAt,
  costUsd: 0,
  tokens: 0,
  idempotencyKey: null,
  branch: null,
  merge: null,
  logPath: null,
  failures: [],
  spans: [...(options.spans ?? []), { kind: "running", start: startedAt, end: endedAt }]
})

describe("criticalPath", () => {
  it("follows a claim wait back to the holder, not the longest-running agent", () => {
    const path = criticalPath([
      agent("holder", 0, 50),
      agent("waiter", 50, 60, {
        spans: [{ kind: "waiting-claims", start: 0, end: 50, note: "shared.txt (write, held by holder)" }]
      }),
      agent("lone", 0, 55)
    ])
    expect(path).toEqual(["holder", "waiter"])
  })

  it("follows the dependency that ended last, through pools held by several agents", () => {
    const path = criticalPath([
      agent("a", 0, 10),
      agent("b", 0, 30),
      agent("c", 30, 40, { dependsOn: ["a", "b"] }),
      agent("d", 40, 45, {
        spans: [{ kind: "waiting-claims", start: 10, end: 40, note: "pool gpu (held by x, c)" }]
      })
    ])
    expect(path).toEqual(["b", "c", "d"])
  })

  it("is empty when no agent started", () => {
    expect(criticalPath([{ ...agent("a", 0, 1), startedAt: null }])).toEqual([])
  })
})
