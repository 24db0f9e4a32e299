import { describe, expect, it } from "@effect/vitest"
import { verdicts } from "../src/lib/targets.ts"
import { claims, floorName, replayName } from "../src/scenarios/claims.ts"
import type { ApproachResult, CaseResult } from "../src/types.ts"

const boundMs = 192

const approach = (name: string, samplesMs: ReadonlyArray<number>): ApproachResult => {
  const sorted = [...samplesMs].sort((a, b) => a - b)
  const medianMs = sorted[sorted.length >> 1]!
  return {
    name,
    samplesMs,
    medianMs,
    minMs: sorted[0]!,
    maxMs: sorted[sorted.length - 1]!,
    ratio: medianMs / boundMs,
    metrics: {},
    error: undefined
  }
}

/** The contended case with the given medians (three equal repetitions each). */
const contended = (ms: Readonly<Record<string, number>>): CaseResult => ({
  label: "2,000 tasks × 2 ms, 1–3 of 50 keys each (seed 7), concurrency 32",
  reps: 3,
  boundMs,
  floorApproach: undefined,
  notes: [],
  approaches: Object.entries(ms).map(([name, value]) => approach(name, [value, value, value]))
})

const peers = {
  "slot then sorted locks": 480,
  "locks one by one then slot": 2600,
  "all-or-nothing greedy": 250,
  "all-or-nothing greedy, once per turn": 215,
  [replayName]: 214
}

const verdictOf = (item: CaseResult, target: string) =>
  verdicts(claims.targets ?? [], [item]).find((verdict) => verdict.target.startsWith(target))!

describe("claims targets against the timer floor", () => {
  it("marks the bound target out of reach only when the floor is at or over 1.05× and corral within 1.05× of it", () => {
    const reach = contended({ ...peers, [floorName]: 206, corral: 212 })
    expect(verdictOf(reach, "corral ≤ 1.05× the bound")).toEqual({
      target: "corral ≤ 1.05× the bound",
      figure: "1.10× (the floor is 1.07×)",
      met: false,
      outOfReach: true
    })
    expect(verdictOf(reach, "remaining gap: corral ≤ 1.05× the timer floor")).toMatchObject({
      figure: "1.03× the floor (the floor is 1.07× the bound)",
      met: true
    })
    const far = contended({ ...peers, [floorName]: 206, corral: 236 })
    expect(verdictOf(far, "corral ≤ 1.05× the bound")).toEqual({
      target: "corral ≤ 1.05× the bound",
      figure: "1.23× (the floor is 1.07×)",
      met: false
    })
    expect(verdictOf(far, "remaining gap: corral ≤ 1.05× the timer floor").met).toBe(false)
    const under = contended({ ...peers, [floorName]: 198, corral: 207 })
    expect(verdictOf(under, "corral ≤ 1.05× the bound")).toEqual({
      target: "corral ≤ 1.05× the bound",
      figure: "1.08× (the floor is 1.03×)",
      met: false
    })
  })

  it("fails the floor check, and drops out of reach, when an approach's median is under the floor's fastest repetition", () => {
    const beaten = contended({ ...peers, "all-or-nothing greedy, once per turn": 204, [floorName]: 206, corral: 212 })
    expect(verdictOf(beaten, "floor held")).toMatchObject({ met: false })
    expect(verdictOf(beaten, "floor held").figure).toContain("all-or-nothing greedy, once per turn 204.0 ms")
    expect(verdictOf(beaten, "corral ≤ 1.05× the bound").outOfReach).toBeUndefined()
    const held = contended({ ...peers, [floorName]: 206, corral: 212 })
    expect(verdictOf(held, "floor held")).toMatchObject({ met: true })
  })

  it("keeps the replay, greedy peer and fastest-approach rows, none of which counts the floor as an approach", () => {
    const item = contended({ ...peers, [floorName]: 150, corral: 212 })
    expect(verdictOf(item, "corral ahead of the all-or-nothing greedy peer").met).toBe(true)
    expect(verdictOf(item, "corral ≤ 1.05× the zero-scheduler-cost replay").figure).toContain("the replay")
    expect(verdictOf(item, "remaining gap: corral ≤ 1.05× the fastest other approach").figure).toContain(replayName)
  })
})
