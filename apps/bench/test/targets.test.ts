import { describe, expect, it } from "@effect/vitest"
import {
  floorHolds,
  multiple,
  overFastest,
  overFloor,
  pairedNoWorseThan,
  ratioAtMost,
  verdicts
} from "../src/lib/targets.ts"
import { median } from "../src/stats.ts"
import type { ApproachResult, CaseResult } from "../src/types.ts"

const approach = (name: string, samplesMs: ReadonlyArray<number>, boundMs = 100): ApproachResult => ({
  name,
  samplesMs,
  medianMs: median(samplesMs),
  minMs: Math.min(...samplesMs),
  maxMs: Math.max(...samplesMs),
  ratio: median(samplesMs) / boundMs,
  metrics: {},
  error: undefined
})

const caseOf = (label: string, approaches: ReadonlyArray<ApproachResult>): CaseResult => ({
  label,
  reps: approaches[0]!.samplesMs.length,
  boundMs: 100,
  floorApproach: undefined,
  notes: [],
  approaches
})

const paired = pairedNoWorseThan("corral no worse than peer", /case/, "corral", "peer")

describe("pairedNoWorseThan", () => {
  it("judges the median of per-repetition ratios, not the ratio of the medians", () => {
    // Medians: corral 104, peer 103 (ratio of medians 1.0097); per repetition corral is faster in 3 of 5.
    const item = caseOf("case", [
      approach("peer", [100, 103, 105, 110, 101]),
      approach("corral", [99, 102, 104, 120, 108])
    ])
    const [verdict] = verdicts([paired], [item])
    expect(verdict).toEqual({
      target: "corral no worse than peer",
      figure: "0.990× peer (median of 5 paired repetitions, 0.990–1.091×, slower in 2)",
      met: true
    })
  })

  it("marks a miss within noise when some repetition meets the target, and plain not met when none does", () => {
    const noisy = caseOf("case a", [approach("peer", [100, 100, 100]), approach("corral", [101, 99, 102])])
    const worse = caseOf("case b", [approach("peer", [100, 100, 100]), approach("corral", [101, 102, 103])])
    const [a] = verdicts([paired], [noisy])
    const [b] = verdicts([paired], [worse])
    expect(a).toMatchObject({ met: false, withinNoise: true })
    expect(a!.figure).toContain("slower in 2")
    expect(b).toEqual({
      target: "corral no worse than peer",
      figure: "1.020× peer (median of 3 paired repetitions, 1.010–1.030×, slower in 3)",
      met: false
    })
    const [both] = verdicts([paired], [noisy, worse])
    expect(both).toMatchObject({ met: false })
    expect(both!.withinNoise).toBeUndefined()
  })

  it("is not evaluated when the peer did not run, and failed when the approach failed", () => {
    const alone = caseOf("case", [approach("corral", [100, 100])])
    expect(verdicts([paired], [alone])[0]).toMatchObject({ met: undefined, figure: "not measured in this run" })
    const failed = caseOf("case", [approach("peer", [100]), { ...approach("corral", [100]), error: "boom" }])
    expect(verdicts([paired], [failed])[0]).toMatchObject({ met: false, figure: "failed: boom" })
  })
})

describe("multiple", () => {
  it("shows a third decimal when two would put the figure on the limit", () => {
    expect(multiple(1.0234, 1.02)).toBe("1.023×")
    expect(multiple(1.0196, 1.02)).toBe("1.020×")
    expect(multiple(1.02, 1.02)).toBe("1.02×")
    expect(multiple(1.0634, 1.05)).toBe("1.06×")
  })

  it("makes a ratio verdict's figure agree with it", () => {
    const item = caseOf("case", [approach("corral", [102.34])])
    expect(verdicts([ratioAtMost("≤ 1.02×", /case/, "corral", 1.02)], [item])[0]).toMatchObject({
      figure: "1.023×",
      met: false
    })
  })
})

describe("ratioAtMost against the same run's floor", () => {
  const target = ratioAtMost("≤ 1.01×", /case/, "corral", 1.01, "floor")

  it("gives the floor's ratio, and marks a miss out of reach only when the floor is at or over the target", () => {
    const over = caseOf("case", [approach("floor", [101.2]), approach("corral", [101.5])])
    expect(verdicts([target], [over])[0]).toEqual({
      target: "≤ 1.01×",
      figure: "1.015× (the floor is 1.012×)",
      met: false,
      outOfReach: true
    })
    const under = caseOf("case", [approach("floor", [100.6]), approach("corral", [101.5])])
    expect(verdicts([target], [under])[0]).toEqual({
      target: "≤ 1.01×",
      figure: "1.015× (the floor is 1.006×)",
      met: false
    })
    const met = caseOf("case", [approach("floor", [101.2]), approach("corral", [100.9])])
    expect(verdicts([target], [met])[0]).toEqual({
      target: "≤ 1.01×",
      figure: "1.009× (the floor is 1.012×)",
      met: true
    })
  })

  it("does not mark out of reach a miss by more than the target over the floor (a real miss, whatever the floor)", () => {
    const far = caseOf("case", [approach("floor", [101.2]), approach("corral", [150])])
    expect(verdicts([target], [far])[0]).toEqual({
      target: "≤ 1.01×",
      figure: "1.50× (the floor is 1.012×)",
      met: false
    })
    const edge = caseOf("case", [approach("floor", [101.2]), approach("corral", [102.3])])
    expect(verdicts([target], [edge])[0]!.outOfReach).toBeUndefined()
  })

  it("marks a miss over several cases out of reach only when every missed case is", () => {
    const over = caseOf("case a", [approach("floor", [101.2]), approach("corral", [101.5])])
    const under = caseOf("case b", [approach("floor", [100.6]), approach("corral", [101.5])])
    expect(verdicts([target], [over, under])[0]!.outOfReach).toBeUndefined()
    expect(verdicts([target], [over, over])[0]).toMatchObject({ met: false, outOfReach: true })
  })

  it("does not mark out of reach when another approach's median is under the floor's fastest repetition", () => {
    const beaten = caseOf("case", [
      approach("floor", [101.2, 101.3, 101.4]),
      approach("peer", [101.1, 101.1, 101.1]),
      approach("corral", [101.5, 101.5, 101.5])
    ])
    expect(verdicts([target], [beaten])[0]).toEqual({
      target: "≤ 1.01×",
      figure: "1.015× (the floor is 1.013×)",
      met: false
    })
    const held = caseOf("case", [
      approach("floor", [101.2, 101.3, 101.4]),
      approach("peer", [101.2, 101.2, 101.2]),
      approach("corral", [101.5, 101.5, 101.5])
    ])
    expect(verdicts([target], [held])[0]).toMatchObject({ met: false, outOfReach: true })
  })

  it("reads as before when the floor did not run", () => {
    const alone = caseOf("case", [approach("corral", [101.5])])
    expect(verdicts([target], [alone])[0]).toEqual({ target: "≤ 1.01×", figure: "1.015×", met: false })
  })
})

describe("overFastest", () => {
  const gap = overFastest("corral ≤ 1.05× the fastest", /case/, "corral", ["replay", "peer", "missing"], 1.05)

  it("takes the fastest of the others in the same case, whichever it is, and names it", () => {
    const replayFaster = caseOf("case", [
      approach("replay", [104, 104, 104]),
      approach("peer", [106, 106, 106]),
      approach("corral", [110, 110, 110])
    ])
    const peerFaster = caseOf("case", [
      approach("replay", [108, 108, 108]),
      approach("peer", [100, 100, 100]),
      approach("corral", [110, 110, 110])
    ])
    expect(verdicts([gap], [replayFaster])[0]).toEqual({
      target: "corral ≤ 1.05× the fastest",
      figure: "1.06× replay (the fastest, 1.04× the bound)",
      met: false
    })
    expect(verdicts([gap], [peerFaster])[0]).toEqual({
      target: "corral ≤ 1.05× the fastest",
      figure: "1.10× peer (the fastest, 1.00× the bound)",
      met: false
    })
  })

  it("is met at or under the limit, skips failed others and is not evaluated when none ran", () => {
    const failedPeer = { ...approach("peer", [90, 90, 90]), medianMs: undefined, error: "boom" }
    const item = caseOf("case", [approach("replay", [100, 100, 100]), failedPeer, approach("corral", [105, 105, 105])])
    expect(verdicts([gap], [item])[0]).toMatchObject({
      figure: "1.05× replay (the fastest, 1.00× the bound)",
      met: true
    })
    const alone = caseOf("case", [approach("corral", [105, 105, 105])])
    expect(verdicts([gap], [alone])[0]).toMatchObject({ figure: "not measured in this run", met: undefined })
  })
})

describe("overFloor", () => {
  const gap = overFloor("corral ≤ 1.05× the floor", /case/, "corral", "floor", 1.05)

  it("divides the approach's median by the floor's and says where the floor lands against the bound", () => {
    const met = caseOf("case", [approach("floor", [102, 102, 102]), approach("corral", [107, 107, 107])])
    expect(verdicts([gap], [met])[0]).toEqual({
      target: "corral ≤ 1.05× the floor",
      figure: "1.049× the floor (the floor is 1.02× the bound)",
      met: true
    })
    const missed = caseOf("case", [approach("floor", [100, 100, 100]), approach("corral", [110, 110, 110])])
    expect(verdicts([gap], [missed])[0]).toMatchObject({
      figure: "1.10× the floor (the floor is 1.00× the bound)",
      met: false
    })
  })

  it("takes a per-case limit and names the floor and bound as told", () => {
    const named = overFloor("gap", /case/, "corral", "peer", (label) => (label === "case a" ? 1.2 : 1.01), {
      floor: "peer",
      bound: "git"
    })
    const a = caseOf("case a", [approach("peer", [100, 100]), approach("corral", [110, 110])])
    const b = caseOf("case b", [approach("peer", [100, 100]), approach("corral", [110, 110])])
    expect(verdicts([named], [a])[0]).toMatchObject({ figure: "1.10× peer (peer is 1.00× git)", met: true })
    expect(verdicts([named], [a, b])[0]).toMatchObject({
      figure: "1.10× peer (peer is 1.00× git); 1.10× peer (peer is 1.00× git)",
      met: false
    })
  })

  it("is failed when the approach or the floor failed, and not evaluated when either did not run", () => {
    const failedFloor = caseOf("case", [
      { ...approach("floor", [100]), medianMs: undefined, error: "down" },
      approach("corral", [100])
    ])
    expect(verdicts([gap], [failedFloor])[0]).toMatchObject({ figure: "failed: down", met: false })
    const failedMine = caseOf("case", [
      approach("floor", [100]),
      { ...approach("corral", [100]), medianMs: undefined, error: "boom" }
    ])
    expect(verdicts([gap], [failedMine])[0]).toMatchObject({ figure: "failed: boom", met: false })
    const noFloor = caseOf("case", [approach("corral", [100])])
    expect(verdicts([gap], [noFloor])[0]).toMatchObject({ figure: "not measured in this run", met: undefined })
    const noMine = caseOf("case", [approach("floor", [100])])
    expect(verdicts([gap], [noMine])[0]).toMatchObject({ figure: "not measured in this run", met: undefined })
  })
})

describe("floorHolds", () => {
  const check = floorHolds("no median under the floor", /case/, "floor")

  it("is met when every other approach's median is at or over the floor's fastest repetition, and names the closest", () => {
    const item = caseOf("case", [
      approach("floor", [200, 203, 206]),
      approach("peer", [204, 205, 210]),
      approach("corral", [220, 230, 240])
    ])
    expect(verdicts([check], [item])[0]).toEqual({
      target: "no median under the floor",
      figure: "the fastest median, peer 205.0 ms, is 1.025× the floor's fastest repetition (200.0 ms)",
      met: true
    })
  })

  it("is not met when an approach's median is under the floor's fastest repetition", () => {
    const item = caseOf("case", [
      approach("floor", [200, 203, 206]),
      approach("peer", [198, 199, 201]),
      approach("corral", [220, 230, 240])
    ])
    expect(verdicts([check], [item])[0]).toEqual({
      target: "no median under the floor",
      figure: "the fastest median, peer 199.0 ms, is 0.995× the floor's fastest repetition (200.0 ms)",
      met: false
    })
  })

  it("is failed when the floor failed and not evaluated when nothing else ran", () => {
    const failedFloor = caseOf("case", [
      { ...approach("floor", [200]), medianMs: undefined, minMs: undefined, error: "down" },
      approach("corral", [220])
    ])
    expect(verdicts([check], [failedFloor])[0]).toMatchObject({ figure: "failed: down", met: false })
    const alone = caseOf("case", [approach("floor", [200])])
    expect(verdicts([check], [alone])[0]).toMatchObject({ figure: "not measured in this run", met: undefined })
  })
})
