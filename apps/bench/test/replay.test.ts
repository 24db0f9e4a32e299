import { describe, expect, it } from "@effect/vitest"
import { claimsPlan, dagPlan, perCase, replay } from "../src/lib/replay.ts"
import { checkDependencies, checkExclusive, recorder } from "../src/lib/schedule.ts"
import { claimJobs, randomDag, remainingPath } from "../src/lib/workload.ts"
import { mostAtOnce } from "./support/mostAtOnce.ts"

describe("zero-cost replay", () => {
  it("plans the greedy claims schedule in virtual time: holders of a key follow each other", () => {
    const plan = claimsPlan([["a"], ["a"], ["b"], ["c"]], 2, 2)
    expect(plan.makespanMs).toBe(4)
    expect(plan.starts).toEqual([0, 2, 0, 2])
    expect(plan.after).toEqual([[], [0], [], []])
  })

  it("plans claims deciding once all ends of an instant are in, or after each end (perCompletion)", () => {
    const keysOf = [["a"], ["b"], ["a", "b"], ["a"]]
    expect(claimsPlan(keysOf, 2, 2).starts).toEqual([0, 0, 2, 4])
    expect(claimsPlan(keysOf, 2, 2, true).starts).toEqual([0, 0, 4, 2])
  })

  it("plans a DAG longest path first and never starts a node before its dependencies", () => {
    const deps = [[], [], [0], [2]]
    const durations = [1, 5, 1, 1]
    const plan = dagPlan(deps, durations, [3, 5, 2, 1], 1)
    expect(plan.makespanMs).toBe(8)
    expect(plan.starts).toEqual([5, 0, 6, 7])
    for (const [i, list] of deps.entries()) for (const dep of list) expect(plan.after[i]).toContain(dep)
  })

  it("replays a claims plan with real timers without two holders of a key overlapping", async () => {
    const keysOf = claimJobs(7, 60, 6).map((job) => job.keys)
    const recorded = recorder(keysOf.length)
    await replay(
      claimsPlan(keysOf, 1, 4),
      keysOf.map(() => 1),
      recorded
    )
    expect(() => checkExclusive(recorded, keysOf)).not.toThrow()
    expect(mostAtOnce(recorded)).toBeLessThanOrEqual(4)
  })

  it("replays a DAG plan with real timers, every node after its dependencies", async () => {
    const nodes = randomDag(11, 40)
    const durations = nodes.map((node) => node.ms % 3)
    const deps = nodes.map((node) => node.deps)
    const recorded = recorder(nodes.length)
    await replay(dagPlan(deps, durations, remainingPath(nodes), 4), durations, recorded)
    expect(() => checkDependencies(recorded, deps)).not.toThrow()
  })
})

describe("perCase", () => {
  it("makes a case's value once per params object, so a floor's plan is not remade in its runs", () => {
    let made = 0
    const planOf = perCase((p: { readonly n: number }) => {
      made++
      return { n: p.n * 2 }
    })
    const a = { n: 1 }
    const b = { n: 1 }
    const first = planOf(a)
    expect(planOf(a)).toBe(first)
    expect(made).toBe(1)
    expect(planOf(b)).toEqual({ n: 2 })
    expect(planOf(b)).not.toBe(first)
    expect(made).toBe(2)
  })
})
