import { Claims, ResourceLocks } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, type Layer, Result, Scope } from "effect"

const req = (claims: Claims.Claims, capacities: Record<string, number> = {}) =>
  Result.getOrThrow(Claims.normalize(claims, capacities))
const holder = (agentId: string, runId = "run") => ({ runId, agentId })

/**
 * The behaviour every ResourceLocks implementation must have.
 */
export const resourceLocksContract = (name: string, layer: Layer.Layer<ResourceLocks.ResourceLocks>) =>
  describe(`ResourceLocks contract: ${name}`, () => {
    const withLocks = <A, E>(f: (locks: ResourceLocks.ResourceLocks["Service"]) => Effect.Effect<A, E, Scope.Scope>) =>
      Effect.gen(function* () {
        return yield* f(yield* ResourceLocks.ResourceLocks)
      }).pipe(Effect.provide(layer, { local: true }))

    it.effect("grants all of a claim set or nothing, and names the blocking holders", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const a = yield* locks.tryAcquire(holder("a"), req({ write: ["src/a.ts"] }))
          assert.strictEqual(a._tag, "Acquired")
          const b = yield* locks.tryAcquire(holder("b"), req({ write: ["src/b.ts", "src/a.ts"] }))
          assert.strictEqual(b._tag, "Blocked")
          if (b._tag === "Blocked") {
            assert.deepStrictEqual(
              b.blockers.map((x) => (x._tag === "Key" ? `${x.key}:${x.holder.agentId}` : x.pool)),
              ["src/a.ts:a"]
            )
          }
          const c = yield* locks.tryAcquire(holder("c"), req({ write: ["src/b.ts"] }))
          assert.strictEqual(c._tag, "Acquired", "b held nothing while blocked")
        })
      )
    )

    it.effect("readers share; a writer excludes readers and writers, hierarchically", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const r1 = yield* locks.tryAcquire(holder("r1"), req({ read: ["src/"] }))
          const r2 = yield* locks.tryAcquire(holder("r2"), req({ read: ["src/a.ts"] }))
          assert.strictEqual(r1._tag, "Acquired")
          assert.strictEqual(r2._tag, "Acquired")
          assert.strictEqual((yield* locks.tryAcquire(holder("w"), req({ write: ["src/a.ts"] })))._tag, "Blocked")
          assert.strictEqual((yield* locks.tryAcquire(holder("w"), req({ write: ["src/b.ts"] })))._tag, "Blocked")
          assert.strictEqual((yield* locks.tryAcquire(holder("w"), req({ write: ["lib/b.ts"] })))._tag, "Acquired")
          if (r1._tag === "Acquired") yield* locks.release(r1.lease)
          assert.strictEqual((yield* locks.tryAcquire(holder("w2"), req({ write: ["src/b.ts"] })))._tag, "Acquired")
        })
      )
    )

    it.effect("pools count capacity", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const pool = (n: number) => req({ pools: { llm: n } }, { llm: 3 })
          assert.strictEqual((yield* locks.tryAcquire(holder("a"), pool(2)))._tag, "Acquired")
          assert.strictEqual((yield* locks.tryAcquire(holder("b"), pool(2)))._tag, "Blocked")
          assert.strictEqual((yield* locks.tryAcquire(holder("c"), pool(1)))._tag, "Acquired")
        })
      )
    )

    it.effect("acquire waits, is released by its scope, and interrupting a waiter leaves nothing held", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const scope = yield* Scope.make()
          yield* locks.acquire(holder("first"), req({ write: ["x"] })).pipe(Scope.provide(scope))
          const waiter = yield* Effect.forkChild(
            Effect.scoped(locks.acquire(holder("second"), req({ write: ["x", "y"] }))),
            {
              startImmediately: true
            }
          )
          yield* Effect.yieldNow
          assert.isUndefined(waiter.pollUnsafe())
          assert.strictEqual((yield* locks.snapshot).waiting.length, 1)
          assert.strictEqual((yield* locks.tryAcquire(holder("third"), req({ write: ["y"] })))._tag, "Acquired")
          const blocked = yield* Effect.forkChild(
            Effect.scoped(locks.acquire(holder("fourth"), req({ write: ["z", "x"] }))),
            {
              startImmediately: true
            }
          )
          yield* Fiber.interrupt(blocked)
          assert.strictEqual((yield* locks.snapshot).waiting.length, 1)
          assert.strictEqual((yield* locks.tryAcquire(holder("fifth"), req({ write: ["z"] })))._tag, "Acquired")
          yield* Scope.close(scope, Exit.void)
          yield* Fiber.interrupt(waiter)
          const held = (yield* locks.snapshot).held.map((h) => `${h.key}:${h.holder.agentId}`).sort()
          assert.deepStrictEqual(held, ["y:third", "z:fifth"])
        })
      )
    )

    it.effect("a waiter is granted as soon as the holder releases", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const scope = yield* Scope.make()
          yield* locks.acquire(holder("first"), req({ write: ["x"] })).pipe(Scope.provide(scope))
          const waiter = yield* Effect.forkChild(
            Effect.scoped(
              Effect.map(locks.acquire(holder("second"), req({ write: ["x"] })), (lease) => lease.holder.agentId)
            ),
            { startImmediately: true }
          )
          yield* Scope.close(scope, Exit.void)
          assert.strictEqual(yield* Fiber.join(waiter), "second")
          assert.deepStrictEqual((yield* locks.snapshot).held, [])
        })
      )
    )

    it.effect("fencing tokens increase with every grant", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const tokens: Array<number> = []
          for (let i = 0; i < 3; i++) {
            const attempt = yield* locks.tryAcquire(holder(`h${i}`), req({ write: ["k"] }))
            if (attempt._tag !== "Acquired") return assert.fail("expected a grant")
            tokens.push(attempt.lease.fencingToken)
            yield* locks.release(attempt.lease)
          }
          assert.isTrue(tokens[0]! < tokens[1]! && tokens[1]! < tokens[2]!)
        })
      )
    )

    it.effect("holders of different runs never release each other's leases", () =>
      withLocks((locks) =>
        Effect.gen(function* () {
          const one = yield* locks.tryAcquire(holder("same", "run-1"), req({ write: ["k"] }))
          const two = yield* locks.tryAcquire(holder("same", "run-2"), req({ write: ["k"] }))
          assert.strictEqual(one._tag, "Acquired")
          assert.strictEqual(two._tag, "Blocked")
          if (two._tag === "Blocked")
            assert.strictEqual(two.blockers[0]?._tag === "Key" && two.blockers[0].holder.runId, "run-1")
        })
      )
    )
  })
