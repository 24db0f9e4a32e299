import { Agent, Corral, ResourceLocks } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { resourceLocksContract } from "./contracts/ResourceLocksContract.ts"

resourceLocksContract("in memory", ResourceLocks.layerMemory)

describe("ResourceLocks.DefaultLocks", () => {
  it.effect("runs without a ResourceLocks service share the process default; providing the reference replaces it", () =>
    Effect.gen(function* () {
      const shared = yield* ResourceLocks.current
      assert.strictEqual(yield* ResourceLocks.current, shared)
      const seen: Array<number> = []
      const agent = Agent.make("a", {
        claims: { write: ["k"] },
        run: Effect.flatMap(ResourceLocks.current, (locks) =>
          Effect.map(locks.snapshot, (snapshot) => seen.push(snapshot.held.length))
        )
      })
      const own = ResourceLocks.makeMemory()
      yield* Corral.run([agent]).pipe(Effect.provideService(ResourceLocks.DefaultLocks, own))
      assert.deepStrictEqual(seen, [1])
      assert.strictEqual((yield* own.snapshot).held.length, 0)
      assert.notStrictEqual(own, shared)
    })
  )
})
