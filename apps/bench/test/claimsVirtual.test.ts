import { Agent, Corral } from "@corral/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { corralInstantMakespan, corralVirtualMakespan, runAtInstants } from "../src/lib/claimsVirtual.ts"

describe("InstantClock", () => {
  it("fires every timer due at an instant before the scheduler's tasks run, as Node.js does", async () => {
    const order: Array<string> = []
    const sleeper = (name: string, ms: number) =>
      Effect.andThen(
        Effect.sleep(ms),
        Effect.sync(() => {
          order.push(name)
          setImmediate(() => order.push(`${name} task`))
        })
      )
    const at = await runAtInstants((clock) =>
      Effect.map(
        Effect.all([sleeper("a", 2), sleeper("b", 2), sleeper("c", 3)], { concurrency: "unbounded" }),
        () => clock.now
      )
    )
    expect(order).toEqual(["a", "b", "a task", "b task", "c", "c task"])
    expect(at).toBe(3)
  })

  it("gives corral's makespan from its decisions, as TestClock does when one agent ends at a time", async () => {
    const jobs = [
      { id: "j0", keys: ["a"] },
      { id: "j1", keys: ["a"] },
      { id: "j2", keys: ["b"] },
      { id: "j3", keys: ["c"] }
    ]
    expect(await corralInstantMakespan({ Agent, Corral }, jobs, 2, 2)).toBe(4)
    expect(await corralVirtualMakespan({ Agent, Corral }, jobs, 2, 2)).toBe(4)
    expect(await corralInstantMakespan({ Agent, Corral }, jobs, 2, 4)).toBe(4)
    expect(await corralInstantMakespan({ Agent, Corral }, jobs.slice(2), 2, 1)).toBe(4)
  })

  it("fails, rather than waiting forever, when an effect waits with no timer pending", async () => {
    await expect(runAtInstants(() => Effect.never)).rejects.toThrow(/no timer pending/)
  })
})
