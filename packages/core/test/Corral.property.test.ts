import { Agent, Corral, type Outcome, ResourceLocks } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"

const KEYS = ["a.ts", "b.ts", "src/", "src/x.ts", "src/y.ts", "db:users"]

interface AgentCase {
  readonly seconds: number
  readonly result: "ok" | "fail" | "die"
  readonly timeout: number | null
  readonly write: ReadonlyArray<string>
  readonly read: ReadonlyArray<string>
  readonly deps: ReadonlyArray<number>
  readonly pool: number | null
}

interface RunCase {
  readonly concurrency: number
  readonly mode: "settle" | "fail-fast"
  readonly agents: ReadonlyArray<AgentCase>
  readonly interruptAt: number | null
}

const agentCase: fc.Arbitrary<AgentCase> = fc.record({
  seconds: fc.integer({ min: 0, max: 5 }),
  result: fc.constantFrom("ok", "ok", "ok", "fail", "die"),
  timeout: fc.option(fc.integer({ min: 1, max: 6 })),
  write: fc.subarray(KEYS, { maxLength: 2 }),
  read: fc.subarray(KEYS, { maxLength: 2 }),
  deps: fc.array(fc.nat({ max: 20 }), { maxLength: 2 }),
  pool: fc.option(fc.integer({ min: 1, max: 2 }))
})

const runCase: fc.Arbitrary<RunCase> = fc.record({
  concurrency: fc.integer({ min: 1, max: 5 }),
  mode: fc.constantFrom("settle", "fail-fast"),
  agents: fc.array(agentCase, { minLength: 1, maxLength: 12 }),
  interruptAt: fc.option(fc.integer({ min: 0, max: 12 }), { freq: 4 })
})

interface Observed {
  readonly id: string
  readonly start: number
  end: number
  readonly deps: Record<string, unknown>
  readonly pool: number
}

const build = (c: RunCase, observed: Array<Observed>) =>
  c.agents.map((a, i) => {
    const id = `n${i}`
    const deps = i === 0 ? [] : [...new Set(a.deps.map((d) => `n${d % i}`))]
    return Agent.make(id, {
      run: (values: Record<string, unknown>) =>
        Effect.gen(function* () {
          const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const record: Observed = { id, start, end: Number.POSITIVE_INFINITY, deps: values, pool: a.pool ?? 0 }
          observed.push(record)
          yield* Effect.addFinalizer(() =>
            Effect.clockWith((clock) => Effect.sync(() => (record.end = clock.currentTimeMillisUnsafe())))
          )
          yield* Effect.sleep(`${a.seconds} seconds`)
          if (a.result === "fail") return yield* Effect.fail(`fail ${id}`)
          if (a.result === "die") return yield* Effect.die(`die ${id}`)
          return id
        }).pipe(Effect.scoped),
      timeout: a.timeout === null ? undefined : `${a.timeout} seconds`,
      claims: { write: a.write, read: a.read, pools: a.pool === null ? undefined : { slots: a.pool } },
      dependsOn: deps
    })
  })

const check = (c: RunCase) =>
  Effect.gen(function* () {
    const observed: Array<Observed> = []
    const agents = build(c, observed)
    const locks = ResourceLocks.makeMemory()
    const events: Array<unknown> = []
    const fiber = yield* Effect.forkChild(
      Corral.run(agents, {
        concurrency: c.concurrency,
        mode: c.mode,
        pools: { slots: 2 },
        onEvent: (e) => Effect.sync(() => events.push(e))
      }).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks)),
      { startImmediately: true }
    )
    if (c.interruptAt !== null) {
      yield* TestClock.adjust(`${c.interruptAt} seconds`)
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual((yield* locks.snapshot).held, [], "locks left after interruption")
      for (const o of observed) assert.isFinite(o.end, `${o.id} was not finalized`)
      return
    }
    yield* Testing.advanceUntilDone(fiber)
    const result = yield* Fiber.join(fiber)
    assert.deepStrictEqual((yield* locks.snapshot).held, [], "locks left after the run")
    const violations = Testing.checkRun(agents, { result, events: events as never }, c.concurrency)
    assert.deepStrictEqual(violations, [])
    checkOverlaps(c, observed)
    checkDependencies(agents, result.outcomes, observed, c.mode)
  })

const checkOverlaps = (c: RunCase, observed: ReadonlyArray<Observed>) => {
  const timeline = new Testing.Timeline()
  for (const o of observed) {
    const a = c.agents[Number(o.id.slice(1))]!
    timeline.intervals.push({
      agentId: o.id,
      start: o.start,
      end: o.end,
      claims: { write: a.write, read: a.read },
      completed: true
    })
  }
  assert.deepStrictEqual(Testing.checkTimeline(timeline, c.concurrency), [])
  const points = observed.flatMap((o) => [
    { at: o.start, delta: o.pool },
    { at: o.end, delta: -o.pool }
  ])
  points.sort((x, y) => x.at - y.at || x.delta - y.delta)
  let used = 0
  for (const p of points) assert.isAtMost((used += p.delta), 2, "pool over capacity")
}

const checkDependencies = (
  agents: ReadonlyArray<Agent.Any>,
  outcomes: ReadonlyArray<Outcome.Outcome>,
  observed: ReadonlyArray<Observed>,
  mode: "settle" | "fail-fast"
) => {
  const byId = new Map(outcomes.map((o) => [o.agentId, o]))
  for (const agent of agents) {
    const outcome = byId.get(agent.id)!
    const run = observed.find((o) => o.id === agent.id)
    for (const dep of agent.dependsOn) {
      const depOutcome = byId.get(dep)!
      if (run !== undefined) {
        assert.strictEqual(depOutcome._tag, "Succeeded", `${agent.id} started before ${dep} succeeded`)
        assert.isAtMost(depOutcome.endedAt, run.start)
        assert.strictEqual(run.deps[dep], dep, "dependency value passed downstream")
      }
    }
    if (outcome._tag === "Skipped") {
      assert.strictEqual(mode, "settle")
      const failedDep = agent.dependsOn.some((d) => byId.get(d)!._tag !== "Succeeded")
      assert.isTrue(failedDep, `${agent.id} skipped without a failed dependency`)
    }
    if (mode === "settle") assert.notInclude(["Cancelled", "Interrupted"], outcome._tag)
  }
}

describe("Corral.run properties", () => {
  it.effect("every agent gets one outcome; bounds, claims, pools and dependencies hold; nothing leaks", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(runCase, (c) => Effect.runPromise(check(c).pipe(Effect.provide(TestClock.layer())))),
        { seed: 20261125, numRuns: 300 }
      )
    )
  )
})
