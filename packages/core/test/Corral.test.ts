import { Agent, Corral, CorralError, type CorralEvent, type Outcome, ResourceLocks, Usage } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { Clock, Context, type Duration, Effect, Exit, Fiber, Logger, Random, Schedule } from "effect"
import { TestClock } from "effect/testing"

const tags = (result: { outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>> }) =>
  Object.fromEntries(result.outcomes.map((o) => [o.agentId, o._tag]))

describe("Corral.run", () => {
  it.effect("agents with different result types run together; outcomes are typed per agent id", () =>
    Effect.gen(function* () {
      const agents = [
        Agent.make("count", { run: Effect.succeed(1) }),
        Agent.make("name", { run: Effect.succeed("one") }),
        Agent.make("check", { run: Effect.fail("bad" as const) })
      ]
      const program = Corral.run(agents)
      expectTypeOf<Effect.Error<typeof program>>().toEqualTypeOf<CorralError.InvalidRun>()
      expectTypeOf<Effect.Services<typeof program>>().toEqualTypeOf<never>()
      const result = yield* program
      expectTypeOf(result.outcomes).toEqualTypeOf<ReadonlyArray<Outcome.Outcome<number | string, "bad">>>()
      expectTypeOf(result.get("count")).toEqualTypeOf<Outcome.Outcome<number, never>>()
      expectTypeOf(result.get("check")).toEqualTypeOf<Outcome.Outcome<never, "bad">>()
      // @ts-expect-error "nope" is not an agent of the run
      result.get("nope")
      const ids: Array<string> = ["count"]
      const dynamic = yield* Corral.run(ids.map((id) => Agent.make(id, { run: Effect.succeed(id.length) })))
      expectTypeOf(dynamic.get("any id")).toEqualTypeOf<Outcome.Outcome<number, never> | undefined>()
      const count = result.get("count")
      assert.strictEqual(count._tag === "Succeeded" ? count.value + 1 : 0, 2)
      assert.deepStrictEqual(
        result.succeeded.map((outcome) => outcome.value),
        [1, "one"]
      )
    })
  )

  it.effect("an agent's run is an effect (a service key among them) or a function of its dependencies", () =>
    Effect.gen(function* () {
      class Greeting extends Context.Service<Greeting, string>()("Greeting") {}
      const agents = [
        Agent.make("effect", { run: Effect.succeed("plain") }),
        Agent.make("key", { run: Greeting }),
        Agent.make("function", { run: () => Effect.succeed("made") })
      ]
      const result = yield* Corral.run(agents).pipe(Effect.provideService(Greeting, "hello"))
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => (outcome._tag === "Succeeded" ? outcome.value : outcome._tag)),
        ["plain", "hello", "made"]
      )
    })
  )

  it.effect("never runs more than `concurrency` agents and reaches the bound when work allows", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = Array.from({ length: 10 }, (_, i) =>
        Testing.scripted(timeline, `a${i}`, { duration: "1 second", result: i })
      )
      const { result, events } = yield* Testing.runScripted(agents, { concurrency: 3 })
      assert.strictEqual(Testing.peakConcurrency(timeline), 3)
      assert.deepStrictEqual(Testing.checkTimeline(timeline, 3), [])
      assert.deepStrictEqual(Testing.checkRun(agents, { result, events }, 3), [])
      assert.isTrue(result.allSucceeded)
      assert.strictEqual(result.wallMs, 4000)
      assert.deepStrictEqual(
        result.succeeded.map((o) => o.value),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
      )
    })
  )

  it.effect("settle: failures, defects, thrown exceptions and timeouts each get their own outcome", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "ok", { duration: "1 second", result: "fine" }),
        Testing.scripted(timeline, "fails", { duration: "1 second", fail: { _tag: "Boom", message: "boom" } }),
        Testing.scripted(timeline, "dies", { duration: "1 second", die: new Error("bug") }),
        Agent.make("throws", {
          run: Effect.sync(() => {
            throw new Error("thrown")
          })
        }),
        Testing.scripted(timeline, "slow", { duration: "1 hour" }, { timeout: "5 seconds" })
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 5 })
      assert.deepStrictEqual(tags(result), {
        ok: "Succeeded",
        fails: "Failed",
        dies: "Failed",
        throws: "Failed",
        slow: "TimedOut"
      })
      const fails = result.get("fails") as Outcome.Failed
      assert.isFalse(fails.defect)
      assert.strictEqual(fails.message, "boom")
      const dies = result.get("dies") as Outcome.Failed
      assert.isTrue(dies.defect)
      assert.strictEqual(dies.message, "bug")
      assert.isTrue((result.get("throws") as Outcome.Failed).defect)
      const slow = result.get("slow") as Outcome.TimedOut
      assert.strictEqual(slow.afterMs, 5000)
      assert.strictEqual(slow.endedAt - (slow.startedAt ?? 0), 5000)
      assert.include(timeline.finalized, "slow")
      assert.strictEqual(result.failed.length, 4)
      assert.isUndefined(result.stopped)
    })
  )

  it.effect("fail-fast: interrupts running siblings (finalizers run) and cancels the rest", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "quick", { duration: "1 second" }),
        Testing.scripted(timeline, "breaks", { duration: "2 seconds", fail: "broken" }),
        Testing.scripted(timeline, "long-1", { duration: "1 hour" }),
        Testing.scripted(timeline, "long-2", { duration: "1 hour" }),
        ...Array.from({ length: 4 }, (_, i) => Testing.scripted(timeline, `later-${i}`, { duration: "1 hour" }))
      ]
      const recorded = yield* Testing.runScripted(agents, { concurrency: 4, mode: "fail-fast" })
      const { result } = recorded
      assert.deepStrictEqual(tags(result), {
        quick: "Succeeded",
        breaks: "Failed",
        "long-1": "Interrupted",
        "long-2": "Interrupted",
        "later-0": "Interrupted",
        "later-1": "Cancelled",
        "later-2": "Cancelled",
        "later-3": "Cancelled"
      })
      assert.deepStrictEqual(result.stopped, { _tag: "AgentFailed", agentId: "breaks", outcome: "Failed" })
      for (const id of ["long-1", "long-2", "later-0"]) assert.include(timeline.finalized, id)
      assert.notInclude(timeline.finalized, "later-1")
      assert.strictEqual(result.endedAt, 2000)
      assert.include((result.get("later-1") as Outcome.Cancelled).reason, `agent "breaks"`)
      assert.deepStrictEqual(Testing.checkRun(agents, recorded, 4), [])
    })
  )

  it.effect("interrupting the run interrupts every agent and runs every finalizer before it returns", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const locks = ResourceLocks.makeMemory()
      const agents = Array.from({ length: 6 }, (_, i) =>
        Testing.scripted(timeline, `a${i}`, { duration: "1 hour" }, { claims: { write: [`file-${i % 2}`] } })
      )
      const fiber = yield* Effect.forkChild(
        Corral.run(agents, { concurrency: 4 }).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks)),
        { startImmediately: true }
      )
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* locks.snapshot).held.length, 2)
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      assert.isTrue(Exit.hasInterrupts(exit))
      assert.deepStrictEqual(timeline.finalized.sort(), ["a0", "a1"])
      assert.deepStrictEqual((yield* locks.snapshot).held, [])
    })
  )

  it.effect("retries with backoff under virtual time and reports every attempt", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agent = Testing.scripted(
        timeline,
        "flaky",
        { duration: "1 second", fail: "transient", failTimes: 2, result: "ok" },
        { retry: Schedule.exponential("1 second") }
      )
      const { result, events } = yield* Testing.runScripted([agent], { concurrency: 1 })
      const outcome = result.get("flaky")!
      assert.strictEqual(outcome._tag, "Succeeded")
      assert.strictEqual(outcome.attempts, 3)
      assert.strictEqual(outcome.endedAt, 3000 + 1000 + 2000)
      assert.deepStrictEqual(
        events.filter((e) => e._tag === "Retrying").map((e) => (e as { attempt: number }).attempt),
        [2, 3]
      )
    })
  )

  it.effect("a timeout covers every attempt", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agent = Testing.scripted(
        timeline,
        "slow-retries",
        { duration: "2 seconds", fail: "again" },
        {
          retry: Schedule.spaced("1 second"),
          timeout: "7 seconds"
        }
      )
      const { result } = yield* Testing.runScripted([agent])
      const outcome = result.get("slow-retries")!
      assert.strictEqual(outcome._tag, "TimedOut")
      assert.strictEqual(outcome.attempts, 3)
    })
  )

  it.effect("reports every bad claim of an agent, and names agents the same way for every problem", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Corral.run(
          [
            Agent.make("ok", { run: Effect.void }),
            "not an agent" as unknown as Agent.Agent<void>,
            Agent.make("edit", {
              run: Effect.void,
              claims: { write: ["src/a.ts", "/abs", "../up"], read: [""], pools: { gpu: 1, llm: 9 } }
            })
          ],
          { pools: { llm: 2 } }
        )
      )
      assert.deepStrictEqual(
        error.issues.map((issue) => [issue.agentId, issue.index, issue.field]),
        [
          [undefined, 1, ""],
          ["edit", 2, "claims.write[1]"],
          ["edit", 2, "claims.write[2]"],
          ["edit", 2, "claims.read[0]"],
          ["edit", 2, "claims.pools.gpu"],
          ["edit", 2, "claims.pools.llm"]
        ]
      )
      assert.include(error.message, "  agents[1]: expected an agent built with Agent.make, got string")
      assert.include(error.message, '  agent "edit" (agents[2]): claims.write[1]: invalid claim "/abs"')
    })
  )

  it.effect("validates everything before anything runs", () =>
    Effect.gen(function* () {
      let ran = 0
      const run = Effect.sync(() => ran++)
      const error = yield* Effect.flip(
        Corral.run(
          [
            Agent.make("a", { run }),
            Agent.make("a", { run }),
            Agent.make(" ", { run }),
            Agent.make("neg", { run, timeout: -5 }),
            Agent.make("bad-duration", { run, timeout: "soon" as unknown as Duration.Input }),
            Agent.make("abs", { run, claims: { write: ["/etc/passwd"] } }),
            Agent.make("escape", { run, claims: { read: ["../secrets"] } }),
            Agent.make("empty", { run, claims: { write: [""] } }),
            Agent.make("pool", { run, claims: { pools: { gpu: 1 } } }),
            Agent.make("too-much", { run, claims: { pools: { llm: 5 } } }),
            Agent.make("ghost", { run, dependsOn: ["nobody"] }),
            Agent.make("self", { run, dependsOn: ["self"] })
          ],
          { concurrency: 0, pools: { llm: 2 } }
        )
      )
      assert.instanceOf(error, CorralError.InvalidRun)
      const messages = error.issues.map((i) => `${i.agentId ?? "-"}|${i.index ?? "-"}|${i.field}|${i.message}`)
      const expect = [
        "-|-|concurrency|must be an integer of at least 1, got 0",
        "a|1|id|duplicate id: agents[0] already uses it",
        "-|2|id|agent ids must not be blank",
        "neg|3|timeout|must not be negative",
        "bad-duration|4|timeout|expected a duration",
        'abs|5|claims.write[0]|invalid claim "/etc/passwd": absolute paths are not allowed',
        'escape|6|claims.read[0]|invalid claim "../secrets": the path escapes the repository',
        'empty|7|claims.write[0]|invalid claim "": keys must not be empty',
        'pool|8|claims.pools.gpu|invalid claim "gpu": unknown pool; the run configures "llm"',
        'too-much|9|claims.pools.llm|invalid claim "llm": asks for 5 but the pool holds 2',
        'ghost|10|dependsOn|unknown agent "nobody"',
        "self|11|dependsOn|an agent cannot depend on itself"
      ]
      assert.strictEqual(messages.length, expect.length, messages.join("\n"))
      expect.forEach((e, i) => {
        assert.include(messages[i], e)
      })
      assert.include(error.message, `agent "abs" (agents[5]): claims.write[0]: invalid claim "/etc/passwd"`)
      assert.strictEqual(ran, 0)
    })
  )

  it.effect("rejects a blank runId and a claim on a named resource with no name", () =>
    Effect.gen(function* () {
      let ran = 0
      const run = Effect.sync(() => ran++)
      for (const runId of ["", "  ", "\t"]) {
        const error = yield* Effect.flip(Corral.run([Agent.make("a", { run })], { runId }))
        assert.instanceOf(error, CorralError.InvalidRun)
        assert.deepStrictEqual(
          error.issues.map((i) => `${i.agentId ?? "-"}|${i.field}|${i.message}`),
          [`-|runId|must not be blank, got ${JSON.stringify(runId)}`]
        )
      }
      const error = yield* Effect.flip(
        Corral.run([
          Agent.make("db", { run, claims: { write: ["db:"], read: ["db:users", " cache: "] } }),
          Agent.make("fine", { run, claims: { write: ["db:users", "./db:"] } })
        ])
      )
      assert.instanceOf(error, CorralError.InvalidRun)
      assert.deepStrictEqual(
        error.issues.map((i) => `${i.agentId ?? "-"}|${i.index}|${i.field}|${i.message}`),
        [
          'db|0|claims.write[0]|invalid claim "db:": a named resource needs a name after ":", like "db:users"',
          'db|0|claims.read[1]|invalid claim " cache: ": a named resource needs a name after ":", like "cache:users"'
        ]
      )
      assert.strictEqual(ran, 0)
    })
  )

  it.effect("rejects a budget that is not a positive number and a negative or fractional maxBypass", () =>
    Effect.gen(function* () {
      let ran = 0
      const run = Effect.sync(() => ran++)
      for (const [options, expected] of [
        [{ budget: { costUsd: -1 } }, "budget.costUsd|must be a positive number, got -1"],
        [{ budget: { tokens: 0 } }, "budget.tokens|must be a positive number, got 0"],
        [{ budget: { costUsd: Number.NaN } }, "budget.costUsd|must be a positive number, got NaN"],
        [{ maxBypass: -1 }, "maxBypass|must be a whole number of at least 0 or Infinity, got -1"],
        [{ maxBypass: 1.5 }, "maxBypass|must be a whole number of at least 0 or Infinity, got 1.5"]
      ] as const) {
        const error = yield* Effect.flip(Corral.run([Agent.make("a", { run })], options))
        assert.instanceOf(error, CorralError.InvalidRun)
        assert.deepStrictEqual(
          error.issues.map((i) => `${i.field}|${i.message}`),
          [expected]
        )
      }
      assert.strictEqual(ran, 0)
      yield* Corral.run([Agent.make("a", { run })], { maxBypass: Infinity, budget: { costUsd: 0.5, tokens: 10 } })
      assert.strictEqual(ran, 1)
    })
  )

  it.effect(
    "rejects agents and options of the wrong shape (untyped callers) with an issue each, before anything runs",
    () =>
      Effect.gen(function* () {
        let ran = 0
        const run = Effect.sync(() => ran++)
        const untyped = (value: unknown): never => value as never
        const cases: ReadonlyArray<readonly [() => Effect.Effect<unknown, CorralError.InvalidRun>, string]> = [
          [() => Corral.run(untyped(undefined)), "agents|expected an array of agents, got undefined"],
          [
            () => Corral.run([Agent.make("a", { run })], { mode: untyped("fast") }),
            'mode|expected "settle" or "fail-fast", got "fast"'
          ],
          [
            () => Corral.run([Agent.make("a", { run })], { onEvent: untyped(5) }),
            "onEvent|expected a function returning an effect, got number"
          ],
          [
            () => Corral.run([Agent.make("a", { run })], { stopOn: untyped("now") }),
            "stopOn|expected an effect, got string"
          ],
          [() => Corral.run([Agent.make(untyped(5), { run })]), "id|expected a string, got number"],
          [
            () => Corral.run([Agent.make("a", { run: untyped(Promise.resolve(1)) as Effect.Effect<void> })]),
            "a|run|expected an effect or a function returning one, got a Promise"
          ],
          [() => Corral.run([Agent.make("a", { run, retry: untyped(3) })]), "a|retry|expected a Schedule, got number"],
          [
            () => Corral.run([Agent.make("a", { run, claims: untyped(null) })]),
            "a|claims|expected an object, got null"
          ],
          [
            () => Corral.run([Agent.make("a", { run, claims: { write: untyped("src/a.ts") } })]),
            "a|claims.write|expected an array of keys, got string"
          ],
          [
            () => Corral.run([Agent.make("a", { run, claims: { read: [untyped(5)] } })]),
            "a|claims.read[0]|expected a string key, got number"
          ],
          [
            () => Corral.run([Agent.make("b", { run }), Agent.make("a", { run, dependsOn: untyped("b") })]),
            "a|dependsOn|expected an array of agent ids, got string"
          ]
        ]
        for (const [attempt, expected] of cases) {
          const error = yield* Effect.flip(Effect.suspend(attempt))
          assert.instanceOf(error, CorralError.InvalidRun)
          assert.deepStrictEqual(
            error.issues.map((i) => [i.agentId, i.field, i.message].filter((part) => part !== undefined).join("|")),
            [expected]
          )
        }
        assert.strictEqual(ran, 0)
      })
  )

  it.effect(
    "an agent whose run is an object or returns something other than an effect fails alone, as a defect naming it",
    () =>
      Effect.gen(function* () {
        const result = yield* Corral.run([
          Agent.make("async", { run: (async () => 1) as unknown as () => Effect.Effect<number> }),
          Agent.make("number", { run: (() => 5) as unknown as () => Effect.Effect<number> }),
          Agent.make("object", { run: {} as unknown as Effect.Effect<number> }),
          Agent.make("fine", { run: () => Effect.succeed(1) })
        ])
        assert.deepStrictEqual(tags(result), { async: "Failed", number: "Failed", object: "Failed", fine: "Succeeded" })
        const object = result.get("object")
        assert(object._tag === "Failed")
        assert.strictEqual((object.error as Error).message, 'agent "object": run is object, not an effect')
        const failed = result.get("async")
        assert(failed._tag === "Failed")
        assert.isTrue(failed.defect)
        assert.instanceOf(failed.error, CorralError.NotAnEffect)
        assert.strictEqual(
          (failed.error as CorralError.NotAnEffect).message,
          'agent "async": run returned a Promise, not an effect (wrap a promise with Effect.promise or Effect.tryPromise)'
        )
      })
  )

  it.effect("reports dependency cycles with their path", () =>
    Effect.gen(function* () {
      const run = Effect.void
      const error = yield* Effect.flip(
        Corral.run([
          Agent.make("a", { run, dependsOn: ["b"] }),
          Agent.make("b", { run, dependsOn: ["c"] }),
          Agent.make("c", { run, dependsOn: ["a"] }),
          Agent.make("d", { run })
        ])
      )
      assert.strictEqual(error.issues.length, 1)
      assert.include(error.issues[0]!.message, "dependency cycle: a -> b -> c -> a")
    })
  )

  it.live("outcomes of many yielding agents carry their own times from the real clock", () =>
    Effect.gen(function* () {
      const seen = new Map<string, { start: number; end: number }>()
      const agents = Array.from({ length: 5_000 }, (_, i) =>
        Agent.make(`a${i}`, {
          run: Effect.gen(function* () {
            const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
            yield* Effect.promise(() => Promise.resolve())
            const end = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
            seen.set(`a${i}`, { start, end })
            return i
          })
        })
      )
      const result = yield* Corral.run(agents, { concurrency: 64 })
      assert.isTrue(result.allSucceeded)
      assert.isAbove(result.startedAt, 1_000_000_000_000, "epoch milliseconds")
      result.outcomes.forEach((o, i) => {
        assert.strictEqual(o._tag, "Succeeded")
        assert.strictEqual((o as Outcome.Succeeded).value, i)
        const own = seen.get(o.agentId)!
        assert.strictEqual(o.queuedAt, result.startedAt, `${o.agentId}: queuedAt`)
        assert.isAtLeast(own.start, o.startedAt!, `${o.agentId} ran before its startedAt`)
        assert.isAtLeast(o.endedAt, own.end, `${o.agentId} ended before its own last reading`)
        assert.isAtMost(o.endedAt, result.endedAt)
        assert.strictEqual(o.waitedMs, o.startedAt! - o.queuedAt, `${o.agentId}: waitedMs`)
      })
    })
  )

  it.effect("a dependent's waitedMs is never negative, on a clock that moves at every reading", () =>
    Effect.gen(function* () {
      let now = 1_000_000
      const ticking: Clock.Clock = {
        ...Clock.Clock.defaultValue(),
        currentTimeMillisUnsafe: () => ++now,
        currentTimeMillis: Effect.sync(() => ++now)
      }
      const result = yield* Corral.run(
        [
          Agent.make("research", { run: Effect.succeed(1) }),
          Agent.make("outline", { dependsOn: ["research"], run: () => Effect.succeed(2) })
        ],
        { concurrency: 1 }
      ).pipe(Effect.provideService(Clock.Clock, ticking))
      const research = result.get("research")
      const outline = result.get("outline")
      assert.isAtLeast(outline.waitedMs, 0)
      assert.isAtLeast(outline.startedAt!, outline.queuedAt)
      assert.isAtLeast(outline.queuedAt, research.endedAt, "queued once its dependency ended")
    })
  )

  it.effect("an empty run succeeds with no outcomes", () =>
    Effect.gen(function* () {
      const result = yield* Corral.run([])
      assert.deepStrictEqual(result.outcomes, [])
      assert.isTrue(result.allSucceeded)
    })
  )

  it.effect("sums usage per agent and per run, and stops the run when the budget is exceeded", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "cheap", {
          duration: "1 second",
          usage: { inputTokens: 100, outputTokens: 10, costUsd: 0.5 }
        }),
        Testing.scripted(timeline, "pricey", { duration: "2 seconds", usage: { inputTokens: 1000, costUsd: 2 } }),
        Testing.scripted(timeline, "running", { duration: "1 hour" }),
        Testing.scripted(timeline, "waiting", { duration: "1 second" }, { dependsOn: ["running"] })
      ]
      const { result, events } = yield* Testing.runScripted(agents, { concurrency: 3, budget: { costUsd: 2 } })
      assert.deepStrictEqual(tags(result), {
        cheap: "Succeeded",
        pricey: "Interrupted",
        running: "Interrupted",
        waiting: "Cancelled"
      })
      assert.deepStrictEqual(result.stopped, {
        _tag: "BudgetExceeded",
        agentId: "pricey",
        limit: "costUsd",
        spent: 2.5,
        budget: 2
      })
      assert.deepStrictEqual(result.get("cheap")!.usage, { inputTokens: 100, outputTokens: 10, costUsd: 0.5 })
      assert.deepStrictEqual(result.usage, { inputTokens: 1100, outputTokens: 10, costUsd: 2.5 })
      assert.include((result.get("running") as Outcome.Interrupted).reason, "costUsd budget of 2 exceeded")
      assert.isTrue(events.some((e) => e._tag === "Stopping"))
    })
  )

  it.effect(
    "a usage report that is not a finite number of at least 0 is dropped with a warning; the budget still holds",
    () =>
      Effect.gen(function* () {
        const warnings: Array<string> = []
        const capture = Logger.layer([
          Logger.make(({ message, logLevel }) => {
            if (logLevel === "Warn") warnings.push(String(Array.isArray(message) ? message[0] : message))
          })
        ])
        const result = yield* Corral.run(
          [
            Agent.make("nan", { run: Usage.report({ costUsd: Number.NaN, inputTokens: 5 }) }),
            Agent.make("refund", { run: Usage.report({ costUsd: -10 }) }),
            Agent.make("text", { run: Usage.report({ inputTokens: "5" as unknown as number }) }),
            Agent.make("pricey", { run: Usage.report({ costUsd: 3 }) })
          ],
          { concurrency: 1, budget: { costUsd: 1 } }
        ).pipe(Effect.provide(capture))
        assert.deepStrictEqual(result.usage, { inputTokens: 0, outputTokens: 0, costUsd: 3 })
        assert.deepStrictEqual(result.stopped, {
          _tag: "BudgetExceeded",
          agentId: "pricey",
          limit: "costUsd",
          spent: 3,
          budget: 1
        })
        assert.deepStrictEqual(warnings, [
          'corral: usage reported by agent "nan" was dropped: costUsd must be a finite number of at least 0, got NaN',
          'corral: usage reported by agent "refund" was dropped: costUsd must be a finite number of at least 0, got -10',
          'corral: usage reported by agent "text" was dropped: inputTokens must be a finite number of at least 0, got "5"'
        ])
      })
  )

  it.effect("a slow subscriber does not slow the agents and a failing one does not break the run", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = Array.from({ length: 4 }, (_, i) => Testing.scripted(timeline, `a${i}`, { duration: "1 second" }))
      const slow = yield* Effect.forkChild(
        Corral.run(agents, { concurrency: 4, onEvent: () => Effect.sleep("1 minute") }),
        { startImmediately: true }
      )
      yield* TestClock.adjust("1 second")
      assert.strictEqual(timeline.intervals.length, 4)
      assert.isTrue(timeline.intervals.every((i) => i.end === 1000))
      yield* Testing.advanceUntilDone(slow, "1 minute")
      assert.isTrue((yield* Fiber.join(slow)).allSucceeded)

      let seen = 0
      const failing = yield* Corral.run(
        [Agent.make("x", { run: Effect.succeed(1) }), Agent.make("y", { run: Effect.succeed(2) })],
        {
          onEvent: () =>
            Effect.sync(() => {
              if (++seen === 2) throw new Error("subscriber bug")
            })
        }
      )
      assert.isTrue(failing.allSucceeded)
      assert.strictEqual(seen, 2)
    })
  )

  it.effect("an onEvent that returns no effect is detached with a warning saying so; the run ends as usual", () =>
    Effect.gen(function* () {
      const warnings: Array<string> = []
      const capture = Logger.layer([
        Logger.make(({ message, logLevel }) => {
          if (logLevel === "Warn") warnings.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
        })
      ])
      const seen: Array<string> = []
      const plain = ((event: CorralEvent.CorralEvent) => {
        seen.push(event._tag)
      }) as unknown as (event: CorralEvent.CorralEvent) => Effect.Effect<void>
      const result = yield* Corral.run([Agent.make("x", { run: Effect.succeed(1) })], { onEvent: plain }).pipe(
        Effect.provide(capture)
      )
      assert.isTrue(result.allSucceeded)
      assert.deepStrictEqual(seen, ["RunStarted"])
      assert.strictEqual(warnings.length, 1)
      assert.include(
        warnings[0]!,
        "onEvent returned undefined for RunStarted, not an effect: return an effect (Effect.void, or wrap the work in Effect.sync)"
      )
    })
  )

  it.live("an async onEvent that rejects is detached without an unhandled rejection", () =>
    Effect.gen(function* () {
      const unhandled: Array<unknown> = []
      const record = (reason: unknown) => unhandled.push(reason)
      // biome-ignore lint/style/noRestrictedGlobals: what is checked is Node's own unhandled-rejection report
      const node = process
      node.on("unhandledRejection", record)
      const rejecting = (async (event: CorralEvent.CorralEvent) => {
        throw new Error(`subscriber broke on ${event._tag}`)
      }) as unknown as (event: CorralEvent.CorralEvent) => Effect.Effect<void>
      const result = yield* Corral.run([Agent.make("x", { run: Effect.succeed(1) })], { onEvent: rejecting }).pipe(
        Effect.provide(Logger.layer([])),
        Effect.ensuring(
          // Node reports an unhandled rejection once the microtasks ran: a timer later.
          Effect.andThen(
            Effect.sleep("1 millis"),
            Effect.sync(() => node.off("unhandledRejection", record))
          )
        )
      )
      assert.isTrue(result.allSucceeded)
      assert.deepStrictEqual(unhandled, [])
    })
  )

  it.effect("events arrive in order and carry consistent progress", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "a", { duration: "1 second" }, { claims: { write: ["x"] } }),
        Testing.scripted(timeline, "b", { duration: "1 second" }, { claims: { write: ["x"] } }),
        Testing.scripted(timeline, "c", { duration: "3 seconds", fail: "no" })
      ]
      const recorded = yield* Testing.runScripted(agents, { concurrency: 2 })
      const seq = recorded.events.map((e: CorralEvent.CorralEvent) =>
        "agentId" in e ? `${e._tag}:${e.agentId}` : e._tag
      )
      assert.deepStrictEqual(seq, [
        "RunStarted",
        "Queued:a",
        "Queued:b",
        "Queued:c",
        "ClaimsAcquired:a",
        "Started:a",
        "WaitingForClaims:b",
        "Started:c",
        "Finished:a",
        "ClaimsAcquired:b",
        "Started:b",
        "Finished:b",
        "Finished:c",
        "RunFinished"
      ])
      const last = recorded.events.at(-1)!
      assert.deepStrictEqual(last.progress, {
        total: 3,
        pending: 0,
        waiting: 0,
        running: 0,
        done: 3,
        succeeded: 2,
        failed: 1,
        timedOut: 0,
        interrupted: 0,
        cancelled: 0,
        skipped: 0
      })
      const waiting = recorded.events.find((e) => e._tag === "WaitingForClaims")!
      assert.strictEqual(waiting.progress.waiting, 1)
      assert.deepStrictEqual(Testing.checkRun(agents, recorded, 2), [])
    })
  )
})

describe("Corral.run ids", () => {
  it.effect("a generated run id comes from the Clock and Random services", () =>
    Effect.gen(function* () {
      const id = () => Effect.map(Corral.run([Agent.make("a", { run: Effect.void })]), (r) => r.runId)
      const first = yield* id().pipe(Random.withSeed("corral"))
      const again = yield* id().pipe(Random.withSeed("corral"))
      const other = yield* id().pipe(Random.withSeed("other"))
      assert.strictEqual(first, again)
      assert.notStrictEqual(first, other)
      assert.match(first, /^19700101T000000-[0-9a-z]{6}$/)
    })
  )
})

describe("Corral.run stopOn", () => {
  it.effect("stops the run when the effect completes and still returns every outcome", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "done", { duration: "1 second" }),
        Testing.scripted(timeline, "running", { duration: "1 hour" }),
        Testing.scripted(timeline, "queued", { duration: "1 second" }, { dependsOn: ["running"] })
      ]
      const { result } = yield* Testing.runScripted(agents, { stopOn: Effect.as(Effect.sleep("5 seconds"), "Ctrl-C") })
      assert.deepStrictEqual(tags(result), { done: "Succeeded", running: "Interrupted", queued: "Cancelled" })
      assert.deepStrictEqual(result.stopped, { _tag: "Stopped", reason: "Ctrl-C" })
      assert.strictEqual(result.endedAt, 5000)
      assert.include(timeline.finalized, "running")
    })
  )
})
