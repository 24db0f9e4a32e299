import { Agent, Corral, CorralError, type Outcome, ToolCalls } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"

type Nested = (keys: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>

const toolCall: Nested = (keys) => ToolCalls.run([{ name: "write", write: keys, run: Effect.void }])
const nestedRun: Nested = (keys) =>
  Corral.run([Agent.make(`inner-${keys.join("+")}`, { claims: { write: keys }, run: Effect.void })])

/** Agent `i` holds key `k<i>`, sleeps `delays[i]` seconds, then takes `inside[i]` in a nested run. */
const agents = (nested: Nested, delays: ReadonlyArray<number>, inside: ReadonlyArray<ReadonlyArray<number>>) =>
  delays.map((seconds, i) =>
    Agent.make(`a${i}`, {
      claims: { write: [`k${i}`] },
      run: Effect.andThen(
        Effect.sleep(`${seconds} seconds`),
        Effect.suspend(() => (inside[i]!.length === 0 ? Effect.void : nested(inside[i]!.map((j) => `k${j}`))))
      )
    })
  )

const runFor = (list: ReadonlyArray<Agent.Any>, seconds: number) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(Corral.run(list, { concurrency: list.length, runId: "r" }), {
      startImmediately: true
    })
    yield* TestClock.adjust(`${seconds} seconds`)
    const exit = fiber.pollUnsafe()
    if (exit === undefined) {
      yield* Fiber.interrupt(fiber)
      return assert.fail(`the run still waits after ${seconds} virtual seconds`)
    }
    return yield* Fiber.join(fiber)
  })

const deadlockOf = (outcome: Outcome.Outcome<unknown, unknown>): CorralError.ClaimDeadlock | undefined =>
  outcome._tag === "Failed" && outcome.error instanceof CorralError.ClaimDeadlock ? outcome.error : undefined

describe("ClaimDeadlock", () => {
  for (const [name, nested] of [
    ["ToolCalls.run", toolCall],
    ["a nested Corral.run", nestedRun]
  ] as const) {
    it.effect(`two agents each taking the other's key through ${name} end at once, one with ClaimDeadlock`, () =>
      Effect.gen(function* () {
        const result = yield* runFor(agents(nested, [1, 1], [[1], [0]]), 1)
        assert.deepStrictEqual(
          result.outcomes.map((outcome) => outcome._tag),
          ["Succeeded", "Failed"]
        )
        const failed = result.outcomes[1]!
        assert.isTrue(failed._tag === "Failed" && failed.defect)
        assert.strictEqual(failed.endedAt, 1000)
        const error = deadlockOf(failed)
        assert.isDefined(error)
        assert.strictEqual(
          error!.message.split(";")[0],
          'claim deadlock: agent "a1" (run r) waits for "k0" held by agent "a0" (run r), which waits for "k1" held by agent "a1" (run r)'
        )
      })
    )
  }

  it.effect("a cycle of three agents fails the one that closes it; the others complete", () =>
    Effect.gen(function* () {
      const result = yield* runFor(agents(nestedRun, [1, 2, 3], [[1], [2], [0]]), 3)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => outcome._tag),
        ["Succeeded", "Succeeded", "Failed"]
      )
      const error = deadlockOf(result.outcomes[2]!)
      assert.deepStrictEqual(
        error?.cycle.map((step) => [step.waiter.agentId, step.key, step.holder.agentId]),
        [
          ["a2", "k0", "a0"],
          ["a0", "k1", "a1"],
          ["a1", "k2", "a2"]
        ]
      )
      assert.strictEqual(error?.agent.agentId, "inner-k0")
    })
  )

  it.effect("a chain that is not a cycle waits and completes", () =>
    Effect.gen(function* () {
      const chain = agents(nestedRun, [1, 1, 5], [[1], [2], []])
      const fiber = yield* Effect.forkChild(Corral.run(chain, { concurrency: 3 }), { startImmediately: true })
      yield* TestClock.adjust("4 seconds")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 5000],
          ["Succeeded", 5000],
          ["Succeeded", 5000]
        ]
      )
    })
  )

  it.effect("a nested agent that ended ClaimTimedOut no longer waits: no cycle through it", () =>
    Effect.gen(function* () {
      const a = Agent.make("a", {
        claims: { write: ["x"] },
        run: Effect.andThen(
          Effect.sleep("1 second"),
          Corral.run(
            [
              Agent.make("inner-y", { claims: { write: ["y"] }, claimTimeout: "1 second", run: Effect.void }),
              Agent.make("busy", { run: Effect.sleep("10 seconds") })
            ],
            { concurrency: 2 }
          )
        )
      })
      const b = Agent.make("b", {
        claims: { write: ["y"] },
        run: Effect.andThen(Effect.sleep("3 seconds"), nestedRun(["x"]))
      })
      const result = yield* runFor([a, b], 11)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 11000],
          ["Succeeded", 11000]
        ]
      )
      const inner = result.outcomes[0]!
      assert.deepStrictEqual(
        inner._tag === "Succeeded"
          ? (inner.value as { outcomes: ReadonlyArray<Outcome.Outcome> }).outcomes.map((outcome) => outcome._tag)
          : [],
        ["ClaimTimedOut", "Succeeded"]
      )
    })
  )

  it.effect("a cycle through a run nested two levels deep is found", () =>
    Effect.gen(function* () {
      const deep = (keys: ReadonlyArray<string>) =>
        Corral.run([Agent.make("middle", { claims: { write: [`m-${keys.join("+")}`] }, run: nestedRun(keys) })])
      const result = yield* runFor(agents(deep, [1, 2], [[1], [0]]), 2)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => outcome._tag),
        ["Succeeded", "Succeeded"]
      )
      const outer = result.outcomes[1]!
      const middle =
        outer._tag === "Succeeded"
          ? (outer.value as { outcomes: ReadonlyArray<Outcome.Outcome> }).outcomes[0]
          : undefined
      assert.strictEqual(middle?._tag, "Failed")
      assert.deepStrictEqual(
        deadlockOf(middle!)?.cycle.map((step) => [step.waiter.agentId, step.key, step.holder.agentId]),
        [
          ["a1", "k0", "a0"],
          ["a0", "k1", "a1"]
        ]
      )
    })
  )

  it.effect("property: a nested request fails iff it closes a cycle of waits; every other agent completes", () =>
    Effect.gen(function* () {
      const caseArb = fc.integer({ min: 2, max: 5 }).chain((n) =>
        fc.record({
          order: fc.shuffledSubarray(
            Array.from({ length: n }, (_, i) => i),
            { minLength: n, maxLength: n }
          ),
          inside: fc.tuple(
            ...Array.from({ length: n }, (_, i) =>
              fc.subarray(
                Array.from({ length: n }, (_, j) => j).filter((j) => j !== i),
                { maxLength: Math.min(2, n - 1) }
              )
            )
          )
        })
      )
      let cycles = 0
      for (const { order, inside } of fc.sample(caseArb, { numRuns: 120, seed: 21 })) {
        const delays = order.map((_, i) => order.indexOf(i) + 1)
        for (const nested of [toolCall, nestedRun]) {
          const result = yield* runFor(agents(nested, delays, inside), order.length)
          const failed = result.outcomes.flatMap((outcome, i) => (deadlockOf(outcome) === undefined ? [] : [i]))
          assert.deepStrictEqual(failed, expectedFailures(order, inside), JSON.stringify({ order, inside }))
          cycles += failed.length
          for (const [i, outcome] of result.outcomes.entries()) {
            if (!failed.includes(i)) assert.strictEqual(outcome._tag, "Succeeded", JSON.stringify({ order, inside }))
          }
        }
      }
      assert.isAbove(cycles, 40)
    })
  )
})

/**
 * The model: agents ask in `order`; one that asks for keys held by agents that wait, through their
 * own nested requests, for it fails; an agent ends (and lets its key go) once nothing it asked for
 * is held.
 */
const expectedFailures = (order: ReadonlyArray<number>, inside: ReadonlyArray<ReadonlyArray<number>>) => {
  const done = new Set<number>()
  const waiting = new Map<number, ReadonlyArray<number>>()
  const failed: Array<number> = []
  const settle = () => {
    for (let changed = true; changed; ) {
      changed = false
      for (const [i, keys] of waiting) {
        if (keys.every((j) => done.has(j))) {
          waiting.delete(i)
          done.add(i)
          changed = true
        }
      }
    }
  }
  const reaches = (from: ReadonlyArray<number>, target: number, seen = new Set<number>()): boolean =>
    from.some((j) => {
      if (done.has(j) || seen.has(j)) return false
      seen.add(j)
      return j === target || reaches(waiting.get(j) ?? [], target, seen)
    })
  for (const i of order) {
    const blockers = inside[i]!.filter((j) => !done.has(j))
    if (reaches(blockers, i)) failed.push(i)
    else if (blockers.length > 0) {
      waiting.set(i, blockers)
      continue
    }
    done.add(i)
    settle()
  }
  return failed.sort((a, b) => a - b)
}

describe("ClaimDeadlock: waits that resolve are never reported", () => {
  it.effect("two agents each reading the other's read key inside do not wait at all", () =>
    Effect.gen(function* () {
      const reader = (own: string, other: string) =>
        Agent.make(`r-${own}`, {
          claims: { read: [own] },
          run: Effect.andThen(
            Effect.sleep("1 second"),
            ToolCalls.run([{ name: "read", read: [other], run: Effect.void }])
          )
        })
      const result = yield* runFor([reader("x", "y"), reader("y", "x")], 1)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 1000],
          ["Succeeded", 1000]
        ]
      )
    })
  )

  it.effect("an agent with two nested runs at once: another agent waiting for one of them is no cycle", () =>
    Effect.gen(function* () {
      const a = Agent.make("a", {
        claims: { write: ["x"] },
        run: Effect.andThen(
          Effect.sleep("1 second"),
          Effect.all(
            [
              nestedRun(["y"]),
              Corral.run([Agent.make("holds-z", { claims: { write: ["z"] }, run: Effect.sleep("5 seconds") })])
            ],
            { concurrency: 2 }
          )
        )
      })
      const b = Agent.make("b", {
        claims: { write: ["y"] },
        run: Effect.andThen(Effect.sleep("2 seconds"), nestedRun(["z"]))
      })
      const result = yield* runFor([a, b], 6)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 6000],
          ["Succeeded", 6000]
        ]
      )
    })
  )

  it.effect("runs with the same agent ids under different outer runs keep their waits apart", () =>
    Effect.gen(function* () {
      const outer = (runId: string, own: string, inside: string, seconds: number) =>
        Effect.forkChild(
          Corral.run(
            [
              Agent.make("a", {
                claims: { write: [own] },
                run: Effect.andThen(
                  Effect.sleep(`${seconds} seconds`),
                  Corral.run([Agent.make("inner", { claims: { write: [inside] }, run: Effect.void })])
                )
              })
            ],
            { runId }
          ),
          { startImmediately: true }
        )
      const one = yield* outer("r1", "x", "y", 1)
      const two = yield* outer("r2", "y", "z", 2)
      const three = yield* outer("r3", "z", "w", 5)
      yield* TestClock.adjust("5 seconds")
      const tags = []
      for (const fiber of [one, two, three]) {
        const exit = fiber.pollUnsafe()
        assert.isDefined(exit)
        const result = yield* Fiber.join(fiber)
        tags.push(result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]))
      }
      assert.deepStrictEqual(tags, [[["Succeeded", 5000]], [["Succeeded", 5000]], [["Succeeded", 5000]]])
    })
  )
})

describe("ClaimDeadlock: a wait bounded by claimTimeout", () => {
  it.effect("is not a wait for ever: the cycle ends when it times out, and nobody dies", () =>
    Effect.gen(function* () {
      const a = Agent.make("a", {
        claims: { write: ["x"] },
        run: Effect.andThen(
          Effect.sleep("1 second"),
          Corral.run([Agent.make("inner-y", { claims: { write: ["y"] }, claimTimeout: "2 seconds", run: Effect.void })])
        )
      })
      const b = Agent.make("b", {
        claims: { write: ["y"] },
        run: Effect.andThen(Effect.sleep("2 seconds"), nestedRun(["x"]))
      })
      const result = yield* runFor([a, b], 3)
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
        [
          ["Succeeded", 3000],
          ["Succeeded", 3000]
        ]
      )
    })
  )
  it.effect(
    "through ToolCalls.run's claimTimeout: the call ends ClaimTimedOut naming the holder, and nobody dies",
    () =>
      Effect.gen(function* () {
        const a = Agent.make("a", {
          claims: { write: ["x"] },
          run: Effect.andThen(
            Effect.sleep("1 second"),
            ToolCalls.run([{ name: "write", write: ["y"], run: Effect.void }], { claimTimeout: "2 seconds" })
          )
        })
        const b = Agent.make("b", {
          claims: { write: ["y"] },
          run: Effect.andThen(Effect.sleep("2 seconds"), toolCall(["x"]))
        })
        const result = yield* runFor([a, b], 3)
        assert.deepStrictEqual(
          result.outcomes.map((outcome) => [outcome._tag, outcome.endedAt]),
          [
            ["Succeeded", 3000],
            ["Succeeded", 3000]
          ]
        )
        const [call] = result.outcomes[0]!._tag === "Succeeded" ? (result.outcomes[0]!.value as any) : []
        assert.strictEqual(call._tag, "ClaimTimedOut")
        assert.strictEqual(call.afterMs, 2000)
        assert.deepStrictEqual(call.blockers, [{ key: "y", holder: "b" }])
      })
  )
})
