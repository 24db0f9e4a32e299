import { Agent, Corral, Usage } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Schedule } from "effect"
import { TestClock } from "effect/testing"
import { compactRuns } from "../src/internal/runner.ts"

/** Runs of at least 256 plain agents without a ledger or a subscriber are compact (`compactRuns` in `runner.ts`). */
const size = 300

describe("compact runs (300 agents)", () => {
  it.effect(
    "outcomes in input order with values, times, attempts and usage, also of fibers that outlive their agent",
    () =>
      Effect.gen(function* () {
        const late = yield* Deferred.make<void>()
        const lateSeen: Array<string | undefined> = []
        let failures = 0
        const agents = Array.from({ length: size }, (_, i) => {
          if (i === 3) return Agent.make("a3", { run: Effect.fail("no") })
          if (i === 4) {
            return Agent.make("a4", {
              run: Effect.suspend(() => (++failures < 2 ? Effect.fail("again") : Effect.succeed(4))),
              retry: Schedule.recurs(2)
            })
          }
          if (i === 5) {
            return Agent.make("a5", {
              run: Effect.gen(function* () {
                yield* Usage.report({ inputTokens: 2 })
                return 5
              })
            })
          }
          if (i === 6) {
            return Agent.make("a6", {
              run: Effect.forkDetach(
                Effect.gen(function* () {
                  yield* Deferred.await(late)
                  lateSeen.push((yield* Agent.current)?.agentId)
                  yield* Usage.report({ inputTokens: 7 })
                })
              ).pipe(Effect.as(6))
            })
          }
          if (i === size - 1) {
            return Agent.make(`a${i}`, {
              run: Effect.andThen(Deferred.succeed(late, undefined), Effect.sleep("1 second")).pipe(Effect.as(i))
            })
          }
          return Agent.make(`a${i}`, { run: Effect.sleep(`${i % 3} seconds`).pipe(Effect.as(i)) })
        })
        const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 8 }), { startImmediately: true })
        yield* TestClock.adjust("1 hour")
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual(lateSeen, ["a6"])
        assert.deepStrictEqual(
          result.outcomes.map((o) => o.agentId),
          agents.map((a) => a.id)
        )
        assert.deepStrictEqual(result.counts, { Succeeded: size - 1, Failed: 1 })
        for (const [i, o] of result.outcomes.entries()) {
          assert.strictEqual(o.queuedAt, result.startedAt)
          assert.strictEqual(o.waitedMs, o.startedAt! - o.queuedAt)
          assert.isAtMost(o.startedAt!, o.endedAt)
          assert.isAtMost(o.endedAt, result.endedAt)
          if (o._tag === "Succeeded" && i !== 3) {
            assert.strictEqual(o.value, i)
            assert.strictEqual(o.cached, false)
            if (i >= 7 && i < size - 1) assert.strictEqual(o.endedAt - o.startedAt!, (i % 3) * 1000)
          }
        }
        const a4 = result.get("a4")!
        assert.strictEqual(a4.attempts, 2)
        assert.strictEqual(result.get("a5")!.usage.inputTokens, 2)
        assert.strictEqual(result.get("a6")!.usage.inputTokens, 7)
        assert.strictEqual(result.get("a7")!.attempts, 1)
        assert.deepStrictEqual(result.get("a7")!.usage, Usage.zero)
      })
  )

  it.effect("fail-fast interrupts the running agents and cancels the rest; a released slot lets the next start", () =>
    Effect.gen(function* () {
      const started: Array<number> = []
      const agents = Array.from({ length: size }, (_, i) =>
        Agent.make(`a${i}`, {
          run: Effect.gen(function* () {
            started.push(i)
            if (i === 0) yield* Corral.releaseSlot
            if (i === 2) return yield* Effect.fail("boom")
            yield* Effect.sleep("10 seconds")
            return i
          })
        })
      )
      const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 2, mode: "fail-fast" }), {
        startImmediately: true
      })
      yield* TestClock.adjust("1 hour")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(started, [0, 1, 2])
      assert.deepStrictEqual(result.counts, { Interrupted: 2, Failed: 1, Cancelled: size - 3 })
      assert.strictEqual(result.get("a3")!._tag, "Cancelled")
      assert.strictEqual(result.get("a3")!.startedAt, null)
      assert.deepStrictEqual(result.stopped, { _tag: "AgentFailed", agentId: "a2", outcome: "Failed" })
    })
  )

  it.effect("a compact run nested inside an agent of a compact run", () =>
    Effect.gen(function* () {
      const inner = (prefix: string) =>
        Array.from({ length: size }, (_, i) => Agent.make(`${prefix}${i}`, { run: Effect.succeed(i) }))
      const agents = Array.from({ length: size }, (_, i) =>
        Agent.make(`o${i}`, {
          run:
            i === 7
              ? Effect.map(Corral.run(inner("i"), { concurrency: 4 }), (r) => r.succeeded.length)
              : Effect.succeed(i)
        })
      )
      const result = yield* Corral.run(agents, { concurrency: 4 })
      assert.isTrue(result.allSucceeded)
      const o7 = result.get("o7")!
      assert.strictEqual(o7._tag === "Succeeded" ? o7.value : undefined, size)
    })
  )

  it.effect("runs the agents it validated when the caller changes its array during the run", () =>
    Effect.gen(function* () {
      const agents: Array<Agent.Agent<number>> = []
      for (let i = 0; i < size; i++) {
        agents.push(
          Agent.make(`a${i}`, {
            run: Effect.sync(() => {
              if (i === 0) agents[size - 1] = Agent.make("other", { run: Effect.succeed(-1) })
              return i
            })
          })
        )
      }
      const result = yield* Corral.run(agents, { concurrency: 4 })
      const last = result.outcomes[size - 1]!
      assert.strictEqual(last.agentId, `a${size - 1}`)
      assert.strictEqual(last._tag === "Succeeded" ? last.value : undefined, size - 1)
    })
  )

  it.effect(
    "a claims run's outcomes, claim timeouts naming their holder included, are those of the same run not compact",
    () =>
      Effect.gen(function* () {
        const agents = Array.from({ length: size }, (_, i) => {
          const key = `k${i % 5}`
          if (i === 10) {
            return Agent.make("hog", { run: Effect.sleep("1 hour").pipe(Effect.as(i)), claims: { write: ["k0"] } })
          }
          if (i % 50 === 15) {
            return Agent.make(`a${i}`, { run: Effect.succeed(i), claims: { write: ["k0"] }, claimTimeout: "5 seconds" })
          }
          if (i % 7 === 3) return Agent.make(`a${i}`, { run: Effect.fail(`no ${i}`), claims: { read: [key] } })
          if (i % 11 === 4) {
            return Agent.make(`a${i}`, {
              run: Effect.gen(function* () {
                yield* Usage.report({ inputTokens: i })
                return i
              }),
              claims: { write: [key] }
            })
          }
          return Agent.make(`a${i}`, {
            run: Effect.sleep(`${i % 3} seconds`).pipe(Effect.as(i)),
            claims: i % 2 === 0 ? { write: [key] } : { read: [key] }
          })
        })
        const runOnce = Effect.gen(function* () {
          const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 8 }), { startImmediately: true })
          yield* TestClock.adjust("2 hours")
          return yield* Fiber.join(fiber)
        })
        const compact = yield* runOnce
        compactRuns.min = size + 1
        const full = yield* runOnce.pipe(Effect.ensuring(Effect.sync(() => (compactRuns.min = 256))))
        const shift = full.startedAt - compact.startedAt
        const moved = (o: (typeof compact.outcomes)[number]) => ({
          ...o,
          queuedAt: o.queuedAt - shift,
          startedAt: o.startedAt === null ? null : o.startedAt - shift,
          endedAt: o.endedAt - shift
        })
        assert.deepStrictEqual(
          compact.outcomes.map((o) => ({ ...o })),
          full.outcomes.map(moved)
        )
        const timedOut = compact.get("a15")!
        assert.strictEqual(timedOut._tag, "ClaimTimedOut")
        assert.include(timedOut._tag === "ClaimTimedOut" ? JSON.stringify(timedOut.blockers) : "", "hog")
        assert.strictEqual(compact.get("hog")!._tag, "Succeeded")
        assert.deepStrictEqual(compact.counts, full.counts)
      })
  )
  it.effect.each([
    ["fail-fast", { mode: "fail-fast" as const }, "AgentFailed"],
    ["stopped from outside", { stopOn: Effect.sleep("30 seconds").pipe(Effect.as("enough")) }, "Stopped"],
    ["over its budget", { budget: { tokens: 500 } }, "BudgetExceeded"],
    ["run to the end", {}, undefined]
  ] as const)(
    "a claims run with retries, usage, a nested run and a stop (%s): its outcomes are those of the same run not compact",
    ([_name, options, stops]) =>
      Effect.gen(function* () {
        const tries = new Map<string, number>()
        const agents = Array.from({ length: size }, (_, i) => {
          const key = `k${i % 4}`
          const id = `a${i}`
          if (i % 13 === 5) {
            return Agent.make(id, {
              run: Effect.suspend(() => {
                const n = (tries.get(id) ?? 0) + 1
                tries.set(id, n)
                return n % 2 === 1 ? Effect.fail("again") : Effect.succeed(i)
              }).pipe(Effect.delay("1 second")),
              retry: Schedule.recurs(2),
              claims: { write: [key] }
            })
          }
          if (i % 17 === 6) {
            return Agent.make(id, {
              run: Corral.run([
                Agent.make(`${id}-inner`, {
                  run: Usage.report({ inputTokens: 10 }).pipe(Effect.andThen(Effect.sleep("2 seconds")), Effect.as(i)),
                  claims: { write: [`n${i}/inner`] }
                })
              ]).pipe(Effect.map((result) => result.counts.Succeeded ?? 0)),
              claims: { write: [`n${i}/`] }
            })
          }
          if (i === 41)
            return Agent.make(id, { run: Effect.sleep("10 seconds").pipe(Effect.andThen(Effect.fail("late"))) })
          if (i % 29 === 7) {
            return Agent.make(id, {
              run: Effect.sleep("1 hour").pipe(Effect.as(i)),
              claims: { write: [key] },
              claimTimeout: "20 seconds"
            })
          }
          return Agent.make(id, {
            run: Usage.report({ inputTokens: 3 }).pipe(Effect.andThen(Effect.sleep(`${i % 3} seconds`)), Effect.as(i)),
            claims: i % 2 === 0 ? { write: [key] } : { read: [key] }
          })
        })
        const runOnce = Effect.gen(function* () {
          tries.clear()
          const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 8, ...options }), {
            startImmediately: true
          })
          yield* TestClock.adjust("3 hours")
          return yield* Fiber.join(fiber)
        })
        const compact = yield* runOnce
        compactRuns.min = size + 1
        const full = yield* runOnce.pipe(Effect.ensuring(Effect.sync(() => (compactRuns.min = 256))))
        const shift = full.startedAt - compact.startedAt
        const moved = (o: (typeof compact.outcomes)[number]) => ({
          ...o,
          queuedAt: o.queuedAt - shift,
          startedAt: o.startedAt === null ? null : o.startedAt - shift,
          endedAt: o.endedAt - shift
        })
        assert.deepStrictEqual(
          compact.outcomes.map((o) => ({ ...o })),
          full.outcomes.map(moved)
        )
        assert.deepStrictEqual(compact.counts, full.counts)
        assert.deepStrictEqual(compact.usage, full.usage)
        assert.deepStrictEqual(compact.stopped, full.stopped)
        assert.strictEqual(compact.stopped?._tag, stops)
        assert.isTrue(compact.outcomes.some((o) => o.attempts > 1 && o._tag === "Succeeded"))
      })
  )
})
