import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { forkedSince, snapshot } from "../src/internal/agentChildren.ts"

// agentChildren.ts reads effect's private `FiberImpl._children` (no public API reaches the children
// forked during part of a fiber). These fail when an effect upgrade renames or reshapes it.
const changed = "effect's FiberImpl._children changed: update packages/core/src/internal/agentChildren.ts"

describe("agentChildren (effect's private FiberImpl._children)", () => {
  it.effect("a fiber's forkChild children are in it, in fork order, and leave it when they end", () =>
    Effect.gen(function* () {
      const parent = Fiber.getCurrent()
      assert.isDefined(parent)
      const self = parent!
      const before = snapshot(self)
      const first = yield* Effect.forkChild(Effect.never, { startImmediately: true })
      const second = yield* Effect.forkChild(Effect.never, { startImmediately: true })
      assert.deepStrictEqual(forkedSince(self, before), [first, second], changed)
      const now = snapshot(self)
      assert.isTrue(now?.has(first) && now.has(second), changed)
      assert.strictEqual(forkedSince(self, now), undefined, changed)
      yield* Fiber.interrupt(first)
      assert.deepStrictEqual(forkedSince(self, before), [second], changed)
      yield* Fiber.interrupt(second)
      assert.strictEqual(forkedSince(self, before), undefined, changed)
    })
  )

  it.effect("fibers forked outside the fiber's children (forkDetach, forkScoped) are not among them", () =>
    Effect.gen(function* () {
      const self = Fiber.getCurrent()!
      const before = snapshot(self)
      const detached = yield* Effect.forkDetach(Effect.never, { startImmediately: true })
      const scoped = yield* Effect.forkScoped(Effect.never, { startImmediately: true })
      assert.strictEqual(forkedSince(self, before), undefined, changed)
      yield* Fiber.interrupt(detached)
      yield* Fiber.interrupt(scoped)
    }).pipe(Effect.scoped)
  )
})
