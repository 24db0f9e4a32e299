import { Agent, Corral, type Outcome } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, type Duration, Effect, Fiber, Logger, Schedule } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"

const finishWithin = <A, E>(effect: Effect.Effect<A, E>, within: Duration.Input = "10 minutes") =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(effect, { startImmediately: true })
    yield* TestClock.adjust(within)
    const exit = fiber.pollUnsafe()
    if (exit === undefined) {
      yield* Fiber.interrupt(fiber)
      return assert.fail(`still running after ${within} of virtual time (deadlock)`)
    }
    return yield* Fiber.join(fiber)
  })

const tags = (result: { outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>> }) =>
  Object.fromEntries(result.outcomes.map((o) => [o.agentId, o._tag]))

const now = Clock.currentTimeMillis

describe("Corral.releaseSlot", () => {
  it.effect("the next agent starts once a running agent releases its slot", () =>
    Effect.gen(function* () {
      const bStarted = yield* Deferred.make<void>()
      const a = Agent.make("a", {
        run: Effect.gen(function* () {
          assert.isTrue(yield* Corral.releaseSlot)
          yield* Deferred.await(bStarted)
        })
      })
      const b = Agent.make("b", { run: Deferred.succeed(bStarted, undefined) })
      const result = yield* finishWithin(Corral.run([a, b], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { a: "Succeeded", b: "Succeeded" })
    })
  )

  it.effect("without a release the same agents wait for each other (the test above can fail)", () =>
    Effect.gen(function* () {
      const bStarted = yield* Deferred.make<void>()
      const a = Agent.make("a", { run: Deferred.await(bStarted), timeout: "1 minute" })
      const b = Agent.make("b", { run: Deferred.succeed(bStarted, undefined) })
      const result = yield* finishWithin(Corral.run([a, b], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { a: "TimedOut", b: "Succeeded" })
    })
  )

  it.effect("a released agent keeps its claims until it ends; agents that hold a slot stay within the bound", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const step = (id: string, seconds: number, release: boolean, write: string) =>
        Agent.make(id, {
          claims: { write: [write] },
          run: Effect.gen(function* () {
            log.push(`${id} start ${yield* now}`)
            if (release) yield* Corral.releaseSlot
            yield* Effect.sleep(`${seconds} seconds`)
            log.push(`${id} end ${yield* now}`)
          })
        })
      const result = yield* finishWithin(
        Corral.run(
          [
            step("a", 10, true, "x"), // releases at once, holds x for 10 s
            step("b", 3, false, "y"), // starts at 0 in the freed slot
            step("c", 1, false, "x"), // needs x: waits for a, not for a slot
            step("d", 2, false, "z") // needs the slot b holds
          ],
          { concurrency: 1 }
        )
      )
      assert.deepStrictEqual(tags(result), { a: "Succeeded", b: "Succeeded", c: "Succeeded", d: "Succeeded" })
      assert.deepStrictEqual(log, [
        "a start 0",
        "b start 0",
        "b end 3000",
        "d start 3000",
        "d end 5000",
        "a end 10000",
        "c start 10000",
        "c end 11000"
      ])
    })
  )

  it.effect("a second release, a release outside a run and one from a fiber that outlived its agent do nothing", () =>
    Effect.gen(function* () {
      assert.isFalse(yield* Corral.releaseSlot)
      const seen: Array<boolean> = []
      const later = yield* Deferred.make<void>()
      const done = yield* Deferred.make<void>()
      const a = Agent.make("a", {
        run: Effect.gen(function* () {
          seen.push(yield* Corral.releaseSlot, yield* Corral.releaseSlot)
          yield* Effect.forkDetach(
            Effect.gen(function* () {
              yield* Deferred.await(later)
              seen.push(yield* Corral.releaseSlot)
              yield* Deferred.succeed(done, undefined)
            })
          )
        })
      })
      const b = Agent.make("b", { run: Effect.void })
      const result = yield* finishWithin(Corral.run([a, b], { concurrency: 1 }))
      yield* Deferred.succeed(later, undefined)
      yield* Deferred.await(done)
      assert.deepStrictEqual(tags(result), { a: "Succeeded", b: "Succeeded" })
      assert.deepStrictEqual(seen, [true, false, false])
    })
  )

  it.effect("a timeout counts the time after the release; the agent's claims and finalizers end with it", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const a = Agent.make("a", {
        claims: { write: ["x"] },
        timeout: "5 seconds",
        run: Effect.gen(function* () {
          yield* Effect.sleep("2 seconds")
          yield* Corral.releaseSlot
          yield* Effect.never
        }).pipe(Effect.ensuring(Effect.sync(() => log.push(`a finalized ${Date.now() >= 0}`))))
      })
      const c = Agent.make("c", {
        claims: { write: ["x"] },
        run: Effect.flatMap(now, (t) => Effect.sync(() => log.push(`c start ${t}`)))
      })
      const b = Agent.make("b", { run: Effect.flatMap(now, (t) => Effect.sync(() => log.push(`b start ${t}`))) })
      const result = yield* finishWithin(Corral.run([a, b, c], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { a: "TimedOut", b: "Succeeded", c: "Succeeded" })
      assert.deepStrictEqual(log, ["b start 2000", "a finalized true", "c start 5000"])
    })
  )

  it.effect("fail-fast interrupts a released agent and runs its finalizers", () =>
    Effect.gen(function* () {
      const finalized: Array<string> = []
      const a = Agent.make("a", {
        claims: { write: ["x"] },
        run: Effect.andThen(Corral.releaseSlot, Effect.never).pipe(
          Effect.ensuring(Effect.sync(() => finalized.push("a")))
        )
      })
      const b = Agent.make("b", { run: Effect.andThen(Effect.sleep("1 second"), Effect.fail("boom")) })
      const c = Agent.make("c", { run: Effect.void })
      const result = yield* finishWithin(Corral.run([a, b, c], { concurrency: 1, mode: "fail-fast" }))
      assert.deepStrictEqual(tags(result), { a: "Interrupted", b: "Failed", c: "Cancelled" })
      assert.deepStrictEqual(finalized, ["a"])
    })
  )

  it.effect("interrupting the run interrupts released agents too", () =>
    Effect.gen(function* () {
      const finalized: Array<string> = []
      const forever = (id: string) =>
        Agent.make(id, {
          run: Effect.andThen(Corral.releaseSlot, Effect.never).pipe(
            Effect.ensuring(Effect.sync(() => finalized.push(id)))
          )
        })
      const fiber = yield* Effect.forkChild(
        Corral.run([forever("a"), forever("b"), forever("c")], { concurrency: 1 }),
        {
          startImmediately: true
        }
      )
      yield* TestClock.adjust("1 second")
      assert.isUndefined(fiber.pollUnsafe())
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual([...finalized].sort(), ["a", "b", "c"])
    })
  )

  it.effect("a retry takes a slot again, ahead of agents not started yet", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      let attempt = 0
      const a = Agent.make("a", {
        retry: Schedule.recurs(1),
        run: Effect.gen(function* () {
          attempt++
          log.push(`a${attempt} start ${yield* now}`)
          yield* Corral.releaseSlot
          yield* Effect.sleep("1 second")
          if (attempt === 1) return yield* Effect.fail("first attempt fails")
          log.push(`a${attempt} end ${yield* now}`)
        })
      })
      const timed = (id: string, seconds: number) =>
        Agent.make(id, {
          run: Effect.gen(function* () {
            log.push(`${id} start ${yield* now}`)
            yield* Effect.sleep(`${seconds} seconds`)
            log.push(`${id} end ${yield* now}`)
          })
        })
      const result = yield* finishWithin(Corral.run([a, timed("b", 5), timed("c", 1)], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { a: "Succeeded", b: "Succeeded", c: "Succeeded" })
      assert.deepStrictEqual(log, [
        "a1 start 0",
        "b start 0",
        "b end 5000",
        "a2 start 5000",
        "c start 5000",
        "a2 end 6000",
        "c end 6000"
      ])
    })
  )

  it.effect("inside a nested run it releases the nested agent's slot, not the enclosing agent's", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const innerBStarted = yield* Deferred.make<void>()
      const inner = Corral.run(
        [
          Agent.make("n1", { run: Effect.andThen(Corral.releaseSlot, Deferred.await(innerBStarted)) }),
          Agent.make("n2", { run: Deferred.succeed(innerBStarted, undefined) })
        ],
        { concurrency: 1 }
      )
      const outer = Agent.make("outer", {
        run: Effect.gen(function* () {
          yield* inner
          yield* Effect.sleep("1 second")
          log.push(`outer end ${yield* now}`)
        })
      })
      const other = Agent.make("other", {
        run: Effect.flatMap(now, (t) => Effect.sync(() => log.push(`other start ${t}`)))
      })
      const result = yield* finishWithin(Corral.run([outer, other], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { outer: "Succeeded", other: "Succeeded" })
      assert.deepStrictEqual(log, ["outer end 1000", "other start 1000"])
    })
  )
})

interface Case {
  readonly concurrency: number
  readonly agents: ReadonlyArray<{
    readonly before: number
    readonly after: number | null
    readonly fails: boolean
    readonly retries: number
    readonly write: ReadonlyArray<string>
  }>
}

const caseOf: fc.Arbitrary<Case> = fc.record({
  concurrency: fc.integer({ min: 1, max: 4 }),
  agents: fc.array(
    fc.record({
      before: fc.integer({ min: 0, max: 4 }),
      after: fc.option(fc.integer({ min: 0, max: 6 })),
      fails: fc.boolean(),
      retries: fc.integer({ min: 0, max: 2 }),
      write: fc.subarray(["x", "y", "z"], { maxLength: 1 })
    }),
    { minLength: 1, maxLength: 10 }
  )
})

/**
 * Agents that sleep, maybe release their slot and sleep again, maybe fail and retry: at every
 * instant the agents that hold a slot are at most `concurrency`, a writer of a key never overlaps
 * another, and every agent ends with the outcome its attempts give.
 */
const check = (c: Case) =>
  Effect.gen(function* () {
    let holding = 0
    let maxHolding = 0
    const writers = new Map<string, number>()
    const agents = c.agents.map((spec, i) => {
      let attempts = 0
      return Agent.make(`a${i}`, {
        claims: { write: spec.write },
        retry: spec.retries > 0 ? Schedule.recurs(spec.retries) : undefined,
        run: Effect.gen(function* () {
          attempts++
          let holds = true
          holding++
          maxHolding = Math.max(maxHolding, holding)
          for (const key of spec.write) {
            assert.strictEqual(writers.get(key) ?? 0, 0, `two writers of ${key}`)
            writers.set(key, 1)
          }
          yield* Effect.sleep(`${spec.before} seconds`)
          if (spec.after !== null) {
            holding--
            holds = false
            assert.isTrue(yield* Corral.releaseSlot)
            yield* Effect.sleep(`${spec.after} seconds`)
          }
          if (holds) holding--
          for (const key of spec.write) writers.set(key, 0)
          if (spec.fails && attempts <= spec.retries) return yield* Effect.fail("again")
          if (spec.fails && spec.retries === 0) return yield* Effect.fail("fails")
        })
      })
    })
    const result = yield* finishWithin(Corral.run(agents, { concurrency: c.concurrency }), "1 hour")
    assert.isAtMost(maxHolding, c.concurrency)
    assert.strictEqual(holding, 0)
    c.agents.forEach((spec, i) => {
      assert.strictEqual(result.outcomes[i]!._tag, spec.fails && spec.retries === 0 ? "Failed" : "Succeeded")
    })
  })

describe("Corral.releaseSlot properties", () => {
  it.effect("slot holders stay within the bound, claims stay exclusive, every agent ends", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(caseOf, (c) =>
          Effect.runPromise(check(c).pipe(Effect.provide([TestClock.layer(), Logger.layer([])])))
        ),
        { seed: 20261126, numRuns: 200 }
      )
    )
  )
})
