import { Agent, Corral, type Outcome, ResourceLocks, type RunResult, ToolCalls, Usage } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import { compactRuns } from "../src/internal/runner.ts"

const KEYS = ["a.ts", "b.ts", "src/", "src/x.ts", "src/y.ts", "db:users"]

interface AgentCase {
  readonly seconds: number
  readonly result: "ok" | "fail" | "die"
  readonly timeout: number | null
  readonly write: ReadonlyArray<string>
  readonly read: ReadonlyArray<string>
  readonly deps: ReadonlyArray<number>
  readonly pool: number | null
  /** Seconds after its start at which a fiber the agent forked (and that outlives it) reports usage. */
  readonly forkReportsAfter: number | null
  /** Runs a nested run of one tool call on (a part of) the agent's own claims. */
  readonly nested: boolean
}

interface RunCase {
  readonly concurrency: number
  readonly mode: "settle" | "fail-fast"
  readonly agents: ReadonlyArray<AgentCase>
  readonly interruptAt: number | null
  /** Seconds after the start at which `stopOn` completes; 0: complete before the run starts. */
  readonly stopAt: number | null
  /** Subscribes to the run's events (the claim gate takes a shorter path in runs nobody observes). */
  readonly observe: boolean
}

const agentCase: fc.Arbitrary<AgentCase> = fc.record({
  seconds: fc.integer({ min: 0, max: 5 }),
  result: fc.constantFrom("ok", "ok", "ok", "fail", "die"),
  timeout: fc.option(fc.integer({ min: 1, max: 6 })),
  write: fc.subarray(KEYS, { maxLength: 2 }),
  read: fc.subarray(KEYS, { maxLength: 2 }),
  deps: fc.array(fc.nat({ max: 20 }), { maxLength: 2 }),
  pool: fc.option(fc.integer({ min: 1, max: 2 })),
  forkReportsAfter: fc.option(fc.integer({ min: 0, max: 8 }), { freq: 2 }),
  nested: fc.boolean()
})

const runCase: fc.Arbitrary<RunCase> = fc.record({
  concurrency: fc.integer({ min: 1, max: 5 }),
  mode: fc.constantFrom("settle", "fail-fast"),
  agents: fc.array(agentCase, { minLength: 1, maxLength: 12 }),
  interruptAt: fc.option(fc.integer({ min: 0, max: 12 }), { freq: 4 }),
  stopAt: fc.option(fc.integer({ min: 0, max: 10 }), { freq: 3 }),
  observe: fc.boolean()
})

interface Observed {
  readonly id: string
  readonly start: number
  end: number
  readonly deps: Record<string, unknown>
  readonly pool: number
  nested: Outcome.Tag | undefined
}

/** A usage report from a fiber an agent forked: when, and whom `Agent.current` named. */
interface Report {
  readonly forkedBy: string
  readonly currentAgent: string | undefined
  readonly at: number
}

const nestedCall = (a: AgentCase) => {
  const write = a.write.slice(0, 1)
  const read = [...a.read, ...a.write].slice(-1)
  return { name: "tool", write: write.length > 0 ? write : undefined, read: write.length > 0 ? undefined : read }
}

const build = (c: RunCase, observed: Array<Observed>, reports: Array<Report>) =>
  c.agents.map((a, i) => {
    const id = `n${i}`
    const deps = i === 0 ? [] : [...new Set(a.deps.map((d) => `n${d % i}`))]
    return Agent.make(id, {
      run: (values: Record<string, unknown>) =>
        Effect.gen(function* () {
          const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const record: Observed = {
            id,
            start,
            end: Number.POSITIVE_INFINITY,
            deps: values,
            pool: a.pool ?? 0,
            nested: undefined
          }
          observed.push(record)
          if (a.forkReportsAfter !== null) {
            yield* Effect.forkDetach(
              Effect.gen(function* () {
                yield* Effect.sleep(`${a.forkReportsAfter!} seconds`)
                const me = yield* Agent.current
                const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
                reports.push({ forkedBy: id, currentAgent: me?.agentId, at })
                yield* Usage.report({ inputTokens: 1 })
              })
            )
          }
          if (a.nested) {
            const [outcome] = yield* ToolCalls.run([{ ...nestedCall(a), run: Effect.void }]).pipe(Effect.orDie)
            record.nested = outcome!._tag
          }
          yield* Effect.addFinalizer(() =>
            Effect.clockWith((clock) => Effect.sync(() => (record.end = clock.currentTimeMillisUnsafe())))
          )
          yield* Effect.sleep(`${a.seconds} seconds`)
          if (a.result === "fail") return yield* Effect.fail(`fail ${id}`)
          if (a.result === "die") return yield* Effect.die(`die ${id}`)
          return id
        }).pipe(Effect.scoped),
      timeout: a.timeout === null ? undefined : `${a.timeout} seconds`,
      claims:
        a.write.length + a.read.length === 0 && a.pool === null
          ? undefined
          : { write: a.write, read: a.read, pools: a.pool === null ? undefined : { slots: a.pool } },
      dependsOn: deps.length === 0 ? undefined : deps
    })
  })

const check = (c: RunCase) =>
  Effect.gen(function* () {
    const observed: Array<Observed> = []
    const reports: Array<Report> = []
    const agents = build(c, observed, reports)
    const locks = ResourceLocks.makeMemory()
    const events: Array<unknown> = []
    const fiber = yield* Effect.forkChild(
      Corral.run(agents, {
        concurrency: c.concurrency,
        mode: c.mode,
        pools: { slots: 2 },
        onEvent: c.observe ? (e) => Effect.sync(() => events.push(e)) : undefined,
        stopOn:
          c.stopAt === null || c.interruptAt !== null
            ? undefined
            : c.stopAt === 0
              ? Effect.succeed("stopped early")
              : Effect.as(Effect.sleep(`${c.stopAt} seconds`), "stopped")
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
    if (c.observe) {
      const violations = Testing.checkRun(agents, { result, events: events as never }, c.concurrency)
      assert.deepStrictEqual(violations, [])
    }
    checkOverlaps(c, observed)
    const stopped = c.stopAt !== null && result.stopped?._tag === "Stopped"
    checkDependencies(agents, result.outcomes, observed, c.mode, stopped)
    checkStop(c, result, observed)
    checkNested(c, observed)
    checkReports(result, reports)
    checkTimes(result, observed)
  })

const checkTimes = (result: RunResult.RunResult, observed: ReadonlyArray<Observed>) => {
  for (const o of result.outcomes) {
    assert.isAtLeast(o.queuedAt, result.startedAt, `${o.agentId} queued before the run`)
    assert.strictEqual(o.waitedMs, (o.startedAt ?? o.endedAt) - o.queuedAt, `${o.agentId}: waitedMs`)
    if (o.startedAt !== null) assert.isAtMost(o.startedAt, o.endedAt, `${o.agentId} ended before it started`)
    assert.isAtMost(o.endedAt, result.endedAt, `${o.agentId} ended after the run`)
    const run = observed.find((r) => r.id === o.agentId)
    if (run !== undefined) assert.strictEqual(o.startedAt, run.start, `${o.agentId}: startedAt`)
  }
}

const checkStop = (c: RunCase, result: RunResult.RunResult, observed: ReadonlyArray<Observed>) => {
  if (c.stopAt === null) return
  const stopMs = c.stopAt * 1000
  if (c.stopAt === 0) {
    assert.deepStrictEqual(observed, [], "an agent started after a stop complete before the run")
    assert.isTrue(result.outcomes.every((o) => o._tag === "Cancelled"))
  }
  if (result.endedAt > stopMs || c.stopAt === 0) {
    assert.deepStrictEqual(result.stopped, { _tag: "Stopped", reason: c.stopAt === 0 ? "stopped early" : "stopped" })
  }
  if (result.stopped?._tag === "Stopped") {
    for (const o of observed) assert.isAtMost(o.start, stopMs, `${o.id} started after the stop`)
    assert.isAtMost(result.endedAt, stopMs, "the run went on after the stop")
  }
}

const checkNested = (c: RunCase, observed: ReadonlyArray<Observed>) => {
  for (const o of observed) {
    const a = c.agents[Number(o.id.slice(1))]!
    if (!a.nested || !Number.isFinite(o.end) || o.nested === undefined) continue
    assert.strictEqual(o.nested, "Succeeded", `${o.id}'s nested tool call on its own claims`)
  }
}

const checkReports = (result: RunResult.RunResult, reports: ReadonlyArray<Report>) => {
  for (const report of reports) assert.strictEqual(report.currentAgent, report.forkedBy, "Agent.current in a fork")
  for (const outcome of result.outcomes) {
    const mine = reports.filter((r) => r.forkedBy === outcome.agentId)
    const counted = mine.filter((r) => r.at < result.endedAt).length
    const maybe = mine.filter((r) => r.at === result.endedAt).length
    assert.isAtLeast(outcome.usage.inputTokens, counted, `${outcome.agentId}: usage of its forked fiber`)
    assert.isAtMost(outcome.usage.inputTokens, counted + maybe, `${outcome.agentId}: usage it did not report`)
  }
}

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
  mode: "settle" | "fail-fast",
  stopped: boolean
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
    if (mode === "settle" && !stopped) assert.notInclude(["Cancelled", "Interrupted"], outcome._tag)
  }
}

/** Agents without claims, dependencies or a timeout, unobserved: the runs `compactRuns` may make compact. */
const plainRunCase: fc.Arbitrary<RunCase> = runCase.map((c) => ({
  ...c,
  observe: false,
  agents: c.agents.map((a) => ({ ...a, write: [], read: [], deps: [], pool: null, timeout: null }))
}))

/** Agents without dependencies, unobserved: the claims runs `compactRuns` may make compact. */
const claimsRunCase: fc.Arbitrary<RunCase> = runCase.map((c) => ({
  ...c,
  observe: false,
  agents: c.agents.map((a) => ({ ...a, deps: [] }))
}))

describe("Corral.run properties", () => {
  it.effect(
    "every agent gets one outcome; bounds, claims, pools, dependencies, stops, nested runs and usage of forked fibers hold; nothing leaks",
    () =>
      Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(runCase, (c) =>
            Effect.runPromise(check(c).pipe(Effect.provide([TestClock.layer(), Logger.layer([])])))
          ),
          { seed: 20261125, numRuns: 300 }
        )
      )
  )
  it.effect("the same holds for compact runs (every agent plain, nodes made when agents start)", () =>
    Effect.promise(async () => {
      compactRuns.min = 0
      try {
        await fc.assert(
          fc.asyncProperty(plainRunCase, (c) =>
            Effect.runPromise(check(c).pipe(Effect.provide([TestClock.layer(), Logger.layer([])])))
          ),
          { seed: 20261126, numRuns: 200 }
        )
      } finally {
        compactRuns.min = 256
      }
    })
  )
  it.effect("the same holds for compact claims runs (nodes made before the run, dropped when agents end)", () =>
    Effect.promise(async () => {
      compactRuns.min = 0
      try {
        await fc.assert(
          fc.asyncProperty(claimsRunCase, (c) =>
            Effect.runPromise(check(c).pipe(Effect.provide([TestClock.layer(), Logger.layer([])])))
          ),
          { seed: 20261128, numRuns: 200 }
        )
      } finally {
        compactRuns.min = 256
      }
    })
  )
})
