import { Agent, Corral, Ledger, RateLimiter } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as References from "effect/References"
import { callerOf } from "../../src/internal/caller.ts"

/** `callerOf` for a fiber whose context is `context`: the parts of a fiber it reads. */
const callerIn = (context: Context.Context<never>) =>
  callerOf({
    context,
    getRef: <S>(ref: Context.Reference<S>) => Context.get(context, ref)
  } as unknown as Fiber.Fiber<unknown, unknown>)

describe("callerOf", () => {
  it("reads a context once for runs outside any agent, and each other context on its own", () => {
    const base = Context.empty()
    const first = callerIn(base)
    assert.strictEqual(callerIn(base), first)
    const limiter = RateLimiter.makeUnsafe({ api: { limit: 1, interval: "1 second" } }, 0)
    const withLimiter = Context.add(base, RateLimiter.RateLimiter, limiter)
    const limited = callerIn(withLimiter)
    assert.notStrictEqual(limited, first)
    assert.strictEqual(limited.limiter, limiter)
    assert.strictEqual(first.limiter, undefined)
    const annotated = Context.add(base, References.CurrentLogAnnotations, { caller: "x" })
    assert.deepStrictEqual(callerIn(annotated).annotations, { caller: "x" })
    assert.deepStrictEqual(callerIn(base).annotations, {})
    assert.strictEqual(callerIn(Context.add(base, Ledger.Ledger, Ledger.makeMemory())).ledger !== undefined, true)
    assert.strictEqual(callerIn(base).ledger, undefined)
  })

  it.effect("reads a nested run's context every time: each agent's is its own", () =>
    Effect.gen(function* () {
      const seen: Array<unknown> = []
      const probe = Effect.withFiber((fiber) => {
        const caller = callerOf(fiber)
        seen.push(caller.parent, caller === callerOf(fiber))
        return Effect.void
      })
      const result = yield* Corral.run([Agent.make("outer", { run: probe })])
      assert.strictEqual(result.allSucceeded, true)
      assert.strictEqual(seen[0] !== undefined, true)
      assert.strictEqual(seen[1], false)
    })
  )
})
