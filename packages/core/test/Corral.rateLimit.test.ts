import { Agent, Corral, CorralError, type CorralEvent, type Outcome, RateLimiter, Usage } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"

const starts = (result: { outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>> }) =>
  Object.fromEntries(result.outcomes.map((o) => [o.agentId, o.startedAt]))

/** An agent on the `api` key whose first call is rate-limited for 30 s and whose second succeeds. */
const flakyOnce = (retry?: Schedule.Schedule<unknown, unknown>) => {
  let calls = 0
  return Agent.make("flaky", {
    rateLimit: "api",
    ...(retry === undefined ? {} : { retry }),
    run: Effect.suspend(() =>
      ++calls === 1
        ? Effect.fail(new RateLimiter.RateLimited({ key: "api", retryAfter: 30_000 }))
        : Effect.succeed("ok")
    )
  })
}

describe("Corral.run with rate limits", () => {
  it.effect("an agent using RateLimiter.withToken needs no RateLimiter layer when the run sets rateLimits", () =>
    Effect.gen(function* () {
      const agent = Agent.make("ask", { run: Effect.succeed("answer").pipe(RateLimiter.withToken("api")) })
      const program = Corral.run([agent], { rateLimits: { api: { limit: 1, interval: "1 second" } } })
      expectTypeOf<Effect.Services<typeof program>>().toEqualTypeOf<never>()
      expectTypeOf<
        Effect.Services<ReturnType<typeof Corral.run<[typeof agent]>>>
      >().toEqualTypeOf<RateLimiter.RateLimiter>()
      const result = yield* program
      assert.deepStrictEqual(
        result.succeeded.map((outcome) => outcome.value),
        ["answer"]
      )
    })
  )

  it.effect("a run's own rateLimits add to a RateLimiter layer; a key neither defines is an InvalidRun issue", () =>
    Effect.gen(function* () {
      const outer = RateLimiter.layer({ shared: { limit: 1, interval: "1 second", burst: 1 } })
      const options = { rateLimits: { own: { limit: 1, interval: "1 second", burst: 1 } } } as const
      let ran = 0
      const agents = [
        Agent.make("a", { rateLimit: "shared", run: Effect.sync(() => ran++) }),
        Agent.make("b", { run: Effect.sync(() => ran++).pipe(RateLimiter.withToken("shared")) }),
        Agent.make("c", { run: Effect.sync(() => ran++).pipe(RateLimiter.withToken("own")) })
      ]
      const { result } = yield* Testing.runScripted(agents, options).pipe(Effect.provide(outer))
      assert.deepStrictEqual(starts(result), { a: 0, b: 0, c: 0 })
      assert.strictEqual(ran, 3)
      assert.strictEqual(result.get("b")!.endedAt, 1000)
      const error = yield* Effect.flip(
        Corral.run([...agents, Agent.make("d", { rateLimit: "nope", run: Effect.void })], options).pipe(
          Effect.provide(outer)
        )
      )
      assert.deepStrictEqual(
        error.issues.map((issue) => issue.message),
        ['unknown rate limit "nope" (known: own, shared)']
      )
      assert.strictEqual(ran, 3)
    })
  )

  it.effect("starts rate-limited agents at the bucket's rate", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = Array.from({ length: 5 }, (_, i) => Testing.scripted(timeline, `a${i}`, {}, { rateLimit: "api" }))
      const { result, events } = yield* Testing.runScripted(agents, {
        concurrency: 5,
        rateLimits: { api: { limit: 1, interval: "1 second", burst: 1 } }
      })
      assert.deepStrictEqual(starts(result), { a0: 0, a1: 1000, a2: 2000, a3: 3000, a4: 4000 })
      assert.deepStrictEqual(Testing.checkRun(agents, { result, events }, 5), [])
      const waits = events.filter((e) => e._tag === "WaitingForRateLimit")
      assert.deepStrictEqual(
        waits.map((e) => [e.agentId, e.key, e.ms]),
        [
          ["a1", "api", 1000],
          ["a2", "api", 1000],
          ["a3", "api", 1000],
          ["a4", "api", 1000]
        ]
      )
      assert.strictEqual(waits[3]!.progress.waiting, 4)
    })
  )

  it.effect("an agent waiting for a token holds no slot", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "call-1", { duration: "1 second" }, { rateLimit: "api" }),
        Testing.scripted(timeline, "call-2", { duration: "1 second" }, { rateLimit: "api" }),
        Testing.scripted(timeline, "local", { duration: "1 second" })
      ]
      const { result } = yield* Testing.runScripted(agents, {
        concurrency: 1,
        rateLimits: { api: { limit: 1, interval: "10 seconds", burst: 1 } }
      })
      assert.deepStrictEqual(starts(result), { "call-1": 0, local: 1000, "call-2": 10_000 })
      assert.deepStrictEqual(Testing.checkTimeline(timeline, 1), [])
    })
  )

  it.effect.each([
    ["with the run's own retries", undefined],
    ["with its own retry policy", Schedule.spaced("10 millis").pipe(Schedule.upTo({ times: 3 }))]
  ] as const)(
    "a RateLimited failure pauses the key for every agent and is retried after retryAfter (%s)",
    ([, retry]) =>
      Effect.gen(function* () {
        const agents = [
          flakyOnce(retry),
          Agent.make("starter", { run: Effect.sleep("1 second") }),
          Agent.make("b", { rateLimit: "api", dependsOn: ["starter"], run: Effect.void }),
          Agent.make("c", { rateLimit: "api", dependsOn: ["starter"], run: Effect.void })
        ]
        const { result } = yield* Testing.runScripted(agents, {
          concurrency: 4,
          rateLimits: { api: { limit: 100, interval: "1 second" } }
        })
        const flaky = result.get("flaky")!
        assert.strictEqual(flaky._tag, "Succeeded")
        assert.strictEqual(flaky.attempts, 2)
        assert.strictEqual(flaky.endedAt, 30_010)
        assert.isAtLeast(result.get("b")!.startedAt!, 30_000)
        assert.isAtLeast(result.get("c")!.startedAt!, 30_000)
      })
  )

  it.effect("an agent with its own retry policy: a retry the policy does not make waits for no pause", () =>
    Effect.gen(function* () {
      const agent = Agent.make("once", {
        rateLimit: "api",
        retry: Schedule.recurs(0),
        run: Effect.fail(new RateLimiter.RateLimited({ key: "api", retryAfter: 30_000 }))
      })
      const { result } = yield* Testing.runScripted([agent], {
        rateLimits: { api: { limit: 10, interval: "1 second" } }
      })
      const outcome = result.get("once")!
      assert.strictEqual(outcome._tag, "Failed")
      assert.strictEqual(outcome.attempts, 1)
      assert.strictEqual(outcome.endedAt, 0)
    })
  )

  it.effect("retries a rate-limited agent at most 5 attempts in all", () =>
    Effect.gen(function* () {
      const agent = Agent.make("always", {
        rateLimit: "api",
        run: Effect.fail(new RateLimiter.RateLimited({ key: "api", retryAfter: 1000 }))
      })
      const { result } = yield* Testing.runScripted([agent], {
        rateLimits: { api: { limit: 10, interval: "1 second" } }
      })
      const outcome = result.get("always") as Outcome.Failed
      assert.strictEqual(outcome._tag, "Failed")
      assert.strictEqual(outcome.attempts, 5)
      assert.strictEqual(outcome.message, 'rate limited on "api": retry after 1000 ms')
    })
  )

  it.effect("uses the RateLimiter service from the context and provides the run's own limiter to agents", () =>
    Effect.gen(function* () {
      const fromContext = yield* Testing.runScripted(
        Array.from({ length: 3 }, (_, i) => Agent.make(`a${i}`, { rateLimit: "svc", run: Effect.void }))
      ).pipe(Effect.provide(RateLimiter.layer({ svc: { limit: 1, interval: "1 second", burst: 1 } })))
      assert.deepStrictEqual(starts(fromContext.result), { a0: 0, a1: 1000, a2: 2000 })
      const inner = Agent.make("inner", {
        run: RateLimiter.RateLimiter.use((limiter) => limiter.tryTake("own"))
      })
      const own = yield* Corral.run([inner], { rateLimits: { own: { limit: 1, interval: "1 second" } } }).pipe(
        Effect.provide(RateLimiter.layer({ other: { limit: 1, interval: "1 second" } }))
      )
      assert.deepStrictEqual(own.succeeded[0]!.value, { _tag: "Taken" })
    })
  )

  it.effect("unknown or unconfigured rate limits and invalid buckets are InvalidRun issues", () =>
    Effect.gen(function* () {
      const agents = [Agent.make("a", { rateLimit: "nope", run: Effect.void })]
      const unknown = yield* Effect.flip(
        Corral.run(agents, { rateLimits: { api: { limit: 1, interval: "1 second" } } })
      )
      assert.instanceOf(unknown, CorralError.InvalidRun)
      assert.deepStrictEqual(unknown.issues, [
        { agentId: "a", index: 0, field: "rateLimit", message: 'unknown rate limit "nope" (known: api)' }
      ])
      const none = yield* Effect.flip(Corral.run(agents))
      assert.include(none.issues[0]!.message, "no rate limits are configured")
      const bad = yield* Effect.flip(
        Corral.run([] as ReadonlyArray<Agent.Agent<void>>, { rateLimits: { api: { limit: -1, interval: "1 second" } } })
      )
      assert.deepStrictEqual(
        bad.issues.map((issue) => issue.field),
        ["rateLimits.api.limit"]
      )
    })
  )
})

/** An agent on `api` whose attempts report `costUsd` each and end in a 429 of `retryAfter` until `fails` ran. */
const spending = (
  id: string,
  options: { readonly costUsd: number; readonly fails: number; readonly retry?: Schedule.Schedule<unknown, unknown> }
) => {
  let calls = 0
  return Agent.make(id, {
    rateLimit: "api",
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    run: Effect.andThen(
      Usage.report({ costUsd: options.costUsd }),
      Effect.suspend(() =>
        ++calls <= options.fails
          ? Effect.fail(new RateLimiter.RateLimited({ key: "api", retryAfter: 60_000 }))
          : Effect.succeed(calls)
      )
    )
  })
}

/** An agent on `api` that asks for its token at 500 ms, while a 429 at 0 ms pauses the key. */
const afterStart = [
  Agent.make("starter", { run: Effect.sleep("500 millis") }),
  Agent.make("queued", { rateLimit: "api", dependsOn: ["starter"], run: Effect.succeed("queued ran") })
]

const bucket = { api: { limit: 100, interval: "1 second" } } as const

const retries = (events: ReadonlyArray<CorralEvent.CorralEvent>) =>
  events.flatMap((e) => (e._tag === "Retrying" ? [[e.agentId, e.attempt, e.at] as const] : []))

const tagsOf = (result: { outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>> }) =>
  Object.fromEntries(result.outcomes.map((o) => [o.agentId, o._tag]))

describe.each([
  ["with the run's own retries", undefined],
  ["with its own retry policy", Schedule.spaced("10 millis").pipe(Schedule.upTo({ times: 3 }))]
] as const)("a rate-limit pause and a budget (%s)", (_, retry) => {
  it.effect("an agent paused by a 429 is interrupted when another agent crosses the budget; the waiters let go", () =>
    Effect.gen(function* () {
      const agents = [
        spending("paused", { costUsd: 0, fails: 1, ...(retry === undefined ? {} : { retry }) }),
        Agent.make("spender", { run: Effect.andThen(Effect.sleep("1 second"), Usage.report({ costUsd: 2 })) }),
        ...afterStart
      ]
      const shared = yield* RateLimiter.make(bucket)
      const first = yield* Testing.runScripted(agents, { concurrency: 4, budget: { costUsd: 1 } }).pipe(
        Effect.provideService(RateLimiter.RateLimiter, shared)
      )
      assert.deepStrictEqual(tagsOf(first.result), {
        paused: "Interrupted",
        spender: "Interrupted",
        starter: "Succeeded",
        queued: "Cancelled"
      })
      const paused = first.result.get("paused") as Outcome.Interrupted
      assert.isFalse(paused.crossedBudget)
      assert.strictEqual(paused.attempts, 1, "the retry the pause held back never ran")
      assert.deepStrictEqual(retries(first.events), [])
      assert.include(paused.reason, 'costUsd budget of 1 exceeded (2) by agent "spender"')
      assert.strictEqual(paused.endedAt, 1000, "the pause does not hold the run")
      assert.isTrue((first.result.get("spender") as Outcome.Interrupted).crossedBudget)
      assert.deepStrictEqual(first.result.stopped?._tag, "BudgetExceeded")
      // the key stays paused until 60 s (the provider's word); the interrupted waiters gave their tokens back
      const next = yield* Testing.runScripted([Agent.make("later", { rateLimit: "api", run: Effect.void })]).pipe(
        Effect.provideService(RateLimiter.RateLimiter, shared)
      )
      assert.strictEqual(next.result.get("later")!.startedAt, 60_010)
    })
  )

  it.effect("usage of an attempt that got a 429 counts: the retry that crosses the budget ends the run", () =>
    Effect.gen(function* () {
      const agents = [spending("paid", { costUsd: 0.6, fails: 1, ...(retry === undefined ? {} : { retry }) })]
      const { result, events } = yield* Testing.runScripted(agents, { rateLimits: bucket, budget: { costUsd: 1 } })
      const [told] = retries(events)
      assert.deepStrictEqual(told?.slice(0, 2), ["paid", 2])
      assert.isAtLeast(told![2], 60_000, "the retry is told when it starts, after the pause")
      const paid = result.get("paid") as Outcome.Interrupted
      assert.strictEqual(paid._tag, "Interrupted")
      assert.isTrue(paid.crossedBudget)
      assert.strictEqual(paid.attempts, 2)
      assert.isAtLeast(paid.endedAt, 60_000)
      assert.deepStrictEqual(result.usage.costUsd, 1.2)
      assert.deepStrictEqual(result.stopped, {
        _tag: "BudgetExceeded",
        agentId: "paid",
        limit: "costUsd",
        spent: 1.2,
        budget: 1
      })
    })
  )

  it.effect("an attempt that crosses the budget and then gets a 429 is not retried and waits for no pause", () =>
    Effect.gen(function* () {
      const agents = [
        spending("over", { costUsd: 2, fails: 5, ...(retry === undefined ? {} : { retry }) }),
        ...afterStart
      ]
      const { result, events } = yield* Testing.runScripted(agents, { rateLimits: bucket, budget: { costUsd: 1 } })
      assert.deepStrictEqual(tagsOf(result), { over: "Interrupted", starter: "Interrupted", queued: "Cancelled" })
      const over = result.get("over") as Outcome.Interrupted
      assert.isTrue(over.crossedBudget)
      assert.strictEqual(over.attempts, 1)
      assert.strictEqual(over.endedAt, 0)
      assert.deepStrictEqual(retries(events), [])
      assert.deepStrictEqual(result.usage.costUsd, 2)
    })
  )
})
