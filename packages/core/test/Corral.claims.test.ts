import { Agent, Claims, Corral, CorralEvent, type Outcome, ResourceLocks } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import { TestClock } from "effect/testing"

describe("Corral.run with claims", () => {
  it.effect("two writers of one file serialize while a third agent runs beside them", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "parser", { duration: "2 seconds" }, { claims: { write: ["src/parser.ts"] } }),
        Testing.scripted(timeline, "parser-tests", { duration: "2 seconds" }, { claims: { write: ["src/parser.ts"] } }),
        Testing.scripted(timeline, "docs", { duration: "3 seconds" }, { claims: { write: ["docs/"] } })
      ]
      const { result, events } = yield* Testing.runScripted(agents, { concurrency: 3 })
      const start = (id: string) => result.get(id)!.startedAt
      assert.deepStrictEqual([start("parser"), start("parser-tests"), start("docs")], [0, 2000, 0])
      assert.strictEqual(result.wallMs, 4000)
      const waiting = events.find((e) => e._tag === "WaitingForClaims")
      assert.isDefined(waiting)
      if (waiting?._tag === "WaitingForClaims") {
        assert.strictEqual(waiting.agentId, "parser-tests")
        assert.deepStrictEqual(waiting.blockers.map(CorralEvent.formatBlocker), [
          "src/parser.ts (write, held by parser)"
        ])
        assert.deepStrictEqual(
          [waiting.progress.running, waiting.progress.waiting, waiting.progress.pending],
          [1, 1, 2]
        )
      }
      assert.strictEqual(result.get("parser-tests")!.waitedMs, 2000)
    })
  )

  it.effect("an agent waiting for claims does not hold a slot: later agents run meanwhile", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "holder", { duration: "10 seconds" }, { claims: { write: ["k"] } }),
        Testing.scripted(timeline, "blocked", { duration: "1 second" }, { claims: { write: ["k"] } }),
        ...Array.from({ length: 4 }, (_, i) => Testing.scripted(timeline, `free-${i}`, { duration: "1 second" }))
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 2 })
      assert.deepStrictEqual(
        ["free-0", "free-1", "free-2", "free-3"].map((id) => result.get(id)!.startedAt),
        [0, 1000, 2000, 3000]
      )
      assert.strictEqual(result.get("blocked")!.startedAt, 10000)
    })
  )

  it.effect("a writer behind a stream of readers is overtaken at most `maxBypass` times", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const readers = (from: number, to: number) =>
        Array.from({ length: to - from }, (_, i) =>
          Testing.scripted(
            timeline,
            `reader-${from + i}`,
            { duration: "2 seconds" },
            { claims: { read: ["index.db"] } }
          )
        )
      const writer = Testing.scripted(timeline, "writer", { duration: "1 second" }, { claims: { write: ["index.db"] } })
      const agents = [...readers(0, 5), writer, ...readers(5, 50)]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 10, maxBypass: 3 })
      const writerStart = result.get("writer")!.startedAt!
      assert.strictEqual(writerStart, 2000)
      const overtook = result.outcomes.filter(
        (o) => o.agentId.startsWith("reader-") && Number(o.agentId.slice(7)) >= 5 && o.startedAt! < writerStart
      )
      assert.strictEqual(overtook.length, 3)
      assert.deepStrictEqual(Testing.checkTimeline(timeline, 10), [])

      const unfair = new Testing.Timeline()
      const again = [
        ...Array.from({ length: 5 }, (_, i) =>
          Testing.scripted(unfair, `r${i}`, { duration: "2 seconds" }, { claims: { read: ["index.db"] } })
        ),
        Testing.scripted(unfair, "writer", { duration: "1 second" }, { claims: { write: ["index.db"] } }),
        ...Array.from({ length: 45 }, (_, i) =>
          Testing.scripted(unfair, `r${i + 5}`, { duration: "2 seconds" }, { claims: { read: ["index.db"] } })
        )
      ]
      const greedy = yield* Testing.runScripted(again, { concurrency: 10, maxBypass: 1_000 })
      assert.isAbove(greedy.result.get("writer")!.startedAt!, 8000, "without the bound the writer starves")
    })
  )

  it.effect("by default `maxBypass` is max(32, 4 × concurrency)", () =>
    Effect.gen(function* () {
      for (const [concurrency, bound] of [
        [4, 32],
        [10, 40]
      ] as const) {
        const timeline = new Testing.Timeline()
        const reader = (i: number) =>
          Testing.scripted(timeline, `reader-${i}`, { duration: "2 seconds" }, { claims: { read: ["index.db"] } })
        const agents = [
          ...Array.from({ length: 5 }, (_, i) => reader(i)),
          Testing.scripted(timeline, "writer", { duration: "1 second" }, { claims: { write: ["index.db"] } }),
          ...Array.from({ length: 120 }, (_, i) => reader(i + 5))
        ]
        const { result } = yield* Testing.runScripted(agents, { concurrency })
        const writerStart = result.get("writer")!.startedAt!
        const overtook = result.outcomes.filter(
          (o) => o.agentId.startsWith("reader-") && Number(o.agentId.slice(7)) >= 5 && o.startedAt! < writerStart
        )
        assert.strictEqual(overtook.length, bound, `concurrency ${concurrency}`)
      }
    })
  )

  it.effect("the bound is per key: a waiter for two keys is overtaken at most `maxBypass` times on each", () =>
    Effect.gen(function* () {
      // "a0" and "b0" read a and b until 2 s; the writer of both waits. Readers of a and of b queued
      // behind it take turns overtaking it: on a at most 3 times (ra0, ra1, ra2), which reserves both
      // keys, so rb2 and later wait for the writer; five agents overtook it in all, no key more than 3.
      const timeline = new Testing.Timeline()
      const read = (id: string, key: string) =>
        Testing.scripted(timeline, id, { duration: "2 seconds" }, { claims: { read: [key] } })
      const agents = [
        read("a0", "a"),
        read("b0", "b"),
        Testing.scripted(timeline, "writer", { duration: "1 second" }, { claims: { write: ["a", "b"] } }),
        ...Array.from({ length: 10 }, (_, i) => [read(`ra${i}`, "a"), read(`rb${i}`, "b")]).flat()
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 10, maxBypass: 3 })
      const writerStart = result.get("writer")!.startedAt!
      assert.strictEqual(writerStart, 2000)
      const overtook = result.outcomes
        .filter((o) => /^r[ab]\d/.test(o.agentId) && o.startedAt! < writerStart)
        .map((o) => o.agentId)
      assert.deepStrictEqual(overtook, ["ra0", "rb0", "ra1", "rb1", "ra2"])
      assert.deepStrictEqual(Testing.checkTimeline(timeline, 10), [])
    })
  )

  it.effect("claimTimeout reports a lock held outside the run, naming the key and its holder", () =>
    Effect.gen(function* () {
      const locks = ResourceLocks.makeMemory()
      const request = Result.getOrThrow(Claims.normalize({ write: ["db:users"] }, {}))
      yield* locks.acquire({ runId: "other-process", agentId: "migrator" }, request)
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(
          timeline,
          "reporting",
          { duration: "1 second" },
          { claims: { read: ["db:users"] }, claimTimeout: "5 seconds" }
        ),
        Testing.scripted(timeline, "after", { duration: "1 second" }, { dependsOn: ["reporting"] }),
        Testing.scripted(timeline, "other", { duration: "1 second" })
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 2 }).pipe(
        Effect.provideService(ResourceLocks.ResourceLocks, locks)
      )
      const outcome = result.get("reporting") as Outcome.ClaimTimedOut
      assert.strictEqual(outcome._tag, "ClaimTimedOut")
      assert.strictEqual(outcome.endedAt, 5000)
      assert.deepStrictEqual(outcome.blockers, [{ key: "db:users", holder: "migrator" }])
      assert.strictEqual(result.get("after")!._tag, "Skipped")
      assert.strictEqual(result.get("other")!._tag, "Succeeded")
      assert.strictEqual((yield* locks.snapshot).held.length, 1)
    })
  )

  it.effect("claimTimeout names the agent in the run holding the key, also after a wake that found it taken", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "first", { duration: "1 second" }, { claims: { write: ["a"] } }),
        Testing.scripted(timeline, "next", { duration: "5 seconds" }, { claims: { write: ["a"] } }),
        Testing.scripted(
          timeline,
          "blocked",
          { duration: "1 second" },
          { claims: { write: ["a"] }, claimTimeout: "3 seconds" }
        ),
        Testing.scripted(
          timeline,
          "alone",
          { duration: "1 second" },
          { claims: { write: ["b"] }, claimTimeout: "3 seconds" }
        )
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 4 })
      const outcome = result.get("blocked") as Outcome.ClaimTimedOut
      assert.strictEqual(outcome._tag, "ClaimTimedOut")
      assert.strictEqual(outcome.endedAt, 3000)
      assert.deepStrictEqual(outcome.blockers, [{ key: "a", holder: "next" }])
      assert.strictEqual(result.get("next")!.startedAt, 1000)
      assert.strictEqual(result.get("alone")!._tag, "Succeeded")
    })
  )

  it.effect("claimTimeout holds for an agent a worker takes as the one before it ends, in a run without events", () =>
    Effect.gen(function* () {
      const agents = [
        Agent.make("holder", { run: Effect.sleep("100 millis"), claims: { write: ["k"] } }),
        Agent.make("short", { run: Effect.sleep("1 millis"), claims: { write: ["x"] } }),
        Agent.make("blocked", { run: Effect.sleep("1 millis"), claims: { write: ["k"] }, claimTimeout: "10 millis" }),
        Agent.make("after", { run: Effect.sleep("1 millis"), claims: { write: ["y"] } })
      ]
      const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 2 }))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      const outcome = result.get("blocked") as Outcome.ClaimTimedOut
      assert.strictEqual(outcome._tag, "ClaimTimedOut")
      assert.strictEqual(outcome.endedAt, 11)
      assert.deepStrictEqual(outcome.blockers, [{ key: "k", holder: "holder" }])
      assert.deepStrictEqual(
        (["holder", "short", "after"] as const).map((id) => [result.get(id)!._tag, result.get(id)!.startedAt]),
        [
          ["Succeeded", 0],
          ["Succeeded", 0],
          ["Succeeded", 1]
        ]
      )
    })
  )

  it.effect("two runs in one process serialize on a shared key and never release each other's claims", () =>
    Effect.gen(function* () {
      const locks = ResourceLocks.makeMemory()
      const timeline = new Testing.Timeline()
      const make = (runId: string) =>
        Corral.run(
          [Testing.scripted(timeline, "writer", { duration: "2 seconds" }, { claims: { write: ["shared.txt"] } })],
          { runId }
        ).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks))
      const one = yield* Effect.forkChild(make("run-1"), { startImmediately: true })
      const two = yield* Effect.forkChild(make("run-2"), { startImmediately: true })
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(
        (yield* locks.snapshot).held.map((h) => h.holder),
        [{ runId: "run-1", agentId: "writer" }]
      )
      yield* Testing.advanceUntilDone(two)
      const [a, b] = [yield* Fiber.join(one), yield* Fiber.join(two)]
      assert.strictEqual(a.get("writer")!.startedAt, 0)
      assert.strictEqual(b.get("writer")!.startedAt, 2000)
      assert.deepStrictEqual(Testing.checkTimeline(timeline, 2), [])
      assert.deepStrictEqual((yield* locks.snapshot).held, [])
    })
  )

  it.effect("pools cap how many agents use a resource at once", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = Array.from({ length: 6 }, (_, i) =>
        Testing.scripted(timeline, `llm-${i}`, { duration: "1 second" }, { claims: { pools: { llm: 1 } } })
      )
      const { result } = yield* Testing.runScripted(agents, { concurrency: 6, pools: { llm: 2 } })
      assert.strictEqual(Testing.peakConcurrency(timeline), 2)
      assert.strictEqual(result.wallMs, 3000)
    })
  )

  it.effect("every lock is free after a fail-fast stop", () =>
    Effect.gen(function* () {
      const locks = ResourceLocks.makeMemory()
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "a", { duration: "1 hour" }, { claims: { write: ["x"] } }),
        Testing.scripted(timeline, "b", { duration: "1 second", fail: "no" }, { claims: { write: ["y"] } }),
        Testing.scripted(timeline, "c", { duration: "1 second" }, { claims: { write: ["x"] } })
      ]
      const { result } = yield* Testing.runScripted(agents, { mode: "fail-fast" }).pipe(
        Effect.provideService(ResourceLocks.ResourceLocks, locks)
      )
      assert.deepStrictEqual(Object.values(result.counts), [1, 1, 1])
      assert.deepStrictEqual((yield* locks.snapshot).held, [])
      const agent = Agent.make("probe", { run: Effect.void, claims: { write: ["x", "y"] } })
      assert.isTrue(
        (yield* Corral.run([agent]).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks))).allSucceeded
      )
    })
  )
})

describe("Agent.current", () => {
  it.effect("gives a running agent its id, attempt and the fencing token of its claims", () =>
    Effect.gen(function* () {
      const seen: Array<Agent.Current | undefined> = []
      const probe = Effect.flatMap(Agent.current, (me) => Effect.sync(() => seen.push(me)))
      yield* Corral.run(
        [
          Agent.make("a", { run: probe, claims: { write: ["k"] } }),
          Agent.make("b", { run: probe, claims: { write: ["k"] } })
        ],
        { runId: "r", concurrency: 1 }
      ).pipe(Effect.provideService(ResourceLocks.ResourceLocks, ResourceLocks.makeMemory()))
      assert.deepStrictEqual(
        seen.map((s) => [s?.runId, s?.agentId, s?.attempt]),
        [
          ["r", "a", 1],
          ["r", "b", 1]
        ]
      )
      assert.isTrue(seen[1]!.fencingToken! > seen[0]!.fencingToken!)
      assert.isUndefined(yield* Agent.current)
    })
  )
})
