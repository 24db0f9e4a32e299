import { describe, expect, it } from "@effect/vitest"
import { recorder } from "../src/lib/schedule.ts"
import { chainMs, spreadMs, timerFloor } from "../src/lib/timerFloor.ts"
import { mostAtOnce } from "./support/mostAtOnce.ts"

describe("timer floor", () => {
  it("runs a chain's timers one after another, each started once the previous has ended", async () => {
    const recorded = recorder(5)
    const ms = await chainMs(5, 2, recorded)
    expect(mostAtOnce(recorded)).toBe(1)
    for (let i = 1; i < 5; i++) expect(recorded.starts[i]!).toBeGreaterThanOrEqual(recorded.ends[i - 1]!)
    expect(ms).toBeGreaterThanOrEqual(recorded.ends[4]! - recorded.starts[0]!)
  })

  it("runs the spread term's tasks on exactly the given number of slots at once", async () => {
    const recorded = recorder(9)
    const ms = await spreadMs(9, 2, 4, recorded)
    expect(mostAtOnce(recorded)).toBe(4)
    expect(ms).toBeGreaterThanOrEqual(Math.max(...recorded.ends) - Math.min(...recorded.starts))
  })

  it("reports both terms and takes the larger as the floor", async () => {
    // 20 ms tasks: one term is 6 times the other, so only a stall of 100 ms in the shorter one could
    // reverse them (2 ms tasks: 2 runs in 200 reversed at load 8)
    const sample = await timerFloor(6, 4, 20, 4)
    expect(sample.metrics.chainMs).toBeGreaterThan(sample.metrics.spreadMs)
    expect(sample.ms).toBe(sample.metrics.chainMs)
    const spread = await timerFloor(1, 12, 20, 2)
    expect(spread.metrics.spreadMs).toBeGreaterThan(spread.metrics.chainMs)
    expect(spread.ms).toBe(spread.metrics.spreadMs)
  })

  it("rejects a chain, task count or slot count that is not a positive integer, naming it", async () => {
    await expect(chainMs(0, 2)).rejects.toThrow(/links/)
    await expect(spreadMs(4, 2, 0)).rejects.toThrow(/slots/)
    await expect(spreadMs(1.5, 2, 2)).rejects.toThrow(/tasks/)
  })
})
