import { describe, expect, it } from "@effect/vitest"
import { checkDependencies, checkExclusive, recorder, ScheduleViolation, timeSplit } from "../src/lib/schedule.ts"
import { metricAtMost, noWorseThan, ratioAtMost, verdicts } from "../src/lib/targets.ts"
import type { ApproachResult, CaseResult } from "../src/types.ts"

const recorded = (intervals: ReadonlyArray<readonly [number, number]>) => {
  const r = recorder(intervals.length)
  intervals.forEach(([start, end], i) => {
    r.starts[i] = start
    r.ends[i] = end
  })
  return r
}

describe("schedule checks", () => {
  it("splits a run's time over the work bound into late tasks and idle slots", () => {
    // Two slots, durations 4 + 2 + 2 = 8 (bound 4); the run from 10 to 17.5: the first start at 10.5,
    // task 0 1 ms late, task 2 waits 0.5 ms for its slot, the last end at 15.5.
    const split = timeSplit(
      recorded([
        [10.5, 15.5],
        [10.5, 12.5],
        [13, 15]
      ]),
      [4, 2, 2],
      2,
      10,
      7.5
    )
    expect(split).toEqual({ lateMs: 0.5, idleMs: 3, firstMs: 0.5, afterLastMs: 2 })
    expect(4 + split.lateMs! + split.idleMs!).toBe(7.5)
  })

  it("accepts holders of one key that follow each other, and rejects overlapping ones", () => {
    const keys = [["a"], ["a", "b"], ["b"]]
    expect(() =>
      checkExclusive(
        recorded([
          [0, 2],
          [2, 4],
          [4, 5]
        ]),
        keys
      )
    ).not.toThrow()
    expect(() =>
      checkExclusive(
        recorded([
          [0, 2],
          [1.5, 4],
          [4, 5]
        ]),
        keys
      )
    ).toThrow(/tasks 0 and 1 held a/)
    expect(() =>
      checkExclusive(
        recorded([
          [0, 2],
          [2, 4],
          [3, 5]
        ]),
        keys
      )
    ).toThrow(ScheduleViolation)
  })

  it("rejects a node that started before a dependency ended, and a task that never ran", () => {
    const deps = [[], [0], [0, 1]]
    expect(() =>
      checkDependencies(
        recorded([
          [0, 1],
          [1, 2],
          [2, 3]
        ]),
        deps
      )
    ).not.toThrow()
    expect(() =>
      checkDependencies(
        recorded([
          [0, 1],
          [1, 2],
          [1.5, 3]
        ]),
        deps
      )
    ).toThrow(/task 2 started before its dependency 1/)
    const unfinished = recorder(2)
    unfinished.begin(0)
    unfinished.end(0)
    expect(() => checkDependencies(unfinished, [[], [0]])).toThrow(/task 1 never ran/)
  })
})

const approach = (
  name: string,
  medianMs: number,
  ratio: number,
  metrics: Record<string, number> = {}
): ApproachResult => ({
  name,
  samplesMs: [medianMs],
  medianMs,
  minMs: medianMs,
  maxMs: medianMs,
  ratio,
  metrics,
  error: undefined
})

const item = (label: string, approaches: ReadonlyArray<ApproachResult>): CaseResult => ({
  label,
  reps: 1,
  boundMs: 100,
  floorApproach: undefined,
  notes: [],
  approaches
})

describe("targets", () => {
  const cases = [
    item("big", [approach("corral", 104, 1.04, { us: 1.2 }), approach("peer", 110, 1.1)]),
    item("small", [approach("corral", 120, 1.2, { us: 2 }), approach("peer", 100, 1)])
  ]

  it("decides each target from the figures of every matching case", () => {
    const [ratioBig, ratioAll, metric, ahead] = verdicts(
      [
        ratioAtMost("big ≤ 1.05×", /big/, "corral", 1.05),
        ratioAtMost("all ≤ 1.05×", /./, "corral", 1.05),
        metricAtMost("us ≤ 1.5", /./, "corral", "us", 1.5, String),
        noWorseThan("ahead of peer", /big/, "corral", "peer")
      ],
      cases
    )
    expect(ratioBig).toEqual({ target: "big ≤ 1.05×", figure: "1.04×", met: true })
    expect(ratioAll?.met).toBe(false)
    expect(ratioAll?.figure).toBe("1.04×; 1.20×")
    expect(metric?.met).toBe(false)
    expect(ahead?.met).toBe(true)
  })

  it("reports a target whose case did not run as not evaluated, and a failed approach as not met", () => {
    const failed = [
      item("big", [{ ...approach("corral", 0, 0), medianMs: undefined, ratio: undefined, error: "boom" }])
    ]
    expect(verdicts([ratioAtMost("x", /huge/, "corral", 1)], cases)[0]?.met).toBeUndefined()
    expect(verdicts([ratioAtMost("x", /big/, "corral", 1)], failed)[0]).toEqual({
      target: "x",
      figure: "failed: boom",
      met: false
    })
  })
})
