import { describe, expect, it } from "@effect/vitest"
import { spawn } from "../src/scenarios/spawn.ts"
import type { ApproachResult, CaseResult } from "../src/types.ts"

const approach = (name: string, medianMs: number, treeCpuMsPerProcess: number): ApproachResult => ({
  name,
  samplesMs: [medianMs],
  medianMs,
  minMs: medianMs,
  maxMs: medianMs,
  ratio: undefined,
  metrics: { cpuMsPerProcess: 0, treeCpuMsPerProcess },
  error: undefined
})

const results = (pool: number, floor: number, corral: number): ReadonlyArray<CaseResult> => [
  {
    label: "200 × true at concurrency 8",
    reps: 5,
    boundMs: undefined,
    floorApproach: "child_process.spawn pool, fresh process",
    notes: [],
    approaches: [
      approach("child_process.spawn pool, fresh process", pool, 1.64),
      approach("spawn helper and /proc watchdog without effect, fresh process (reference)", floor, 2.1),
      approach("corral ProcessAgent", corral, 2.47)
    ]
  }
]

const gap = spawn.targets![1]!

describe("spawn's design-floor line", () => {
  it("gives the floor's ratio to the plain pool, corral's extra per process over it and the room left for 1.2×", () => {
    const verdict = gap.evaluate(results(200, 220, 300))
    expect(verdict?.met).toBeUndefined()
    expect(verdict?.figure).toBe(
      "floor 1.10× the plain pool (+0.10 ms per process); corral +0.40 ms per process over the floor; " +
        "tree CPU per process: pool 1.64, floor 2.10, corral 2.47 ms; " +
        "1.2× would need corral to add at most +0.10 ms per process over the floor"
    )
  })

  it("says when the floor alone is above 1.2×", () => {
    expect(gap.evaluate(results(200, 250, 300))?.figure).toMatch(/the floor alone is above 1\.2×$/)
  })

  it("is left out when a row is missing", () => {
    expect(gap.evaluate([{ ...results(200, 220, 300)[0]!, approaches: [] }])).toBeUndefined()
  })
})
