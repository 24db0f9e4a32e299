import { Claims, Corral, ResourceLocks } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import fc from "fast-check"

// In a run nobody observes, agents wait at the claim gate, are woken when a holder lets a key go and
// may be passed over by a better-placed waiter. These cases cancel agents in those states — claim
// timeouts and fail-fast stops while waiting or just woken — and check that nothing overlaps, every
// agent gets one outcome and nothing stays held.

const KEYS = ["a", "b", "c", "src/", "src/x.ts", "src/y.ts"]

interface Job {
  readonly id: string
  readonly seconds: number
  readonly write: ReadonlyArray<string>
  readonly read: ReadonlyArray<string>
  readonly pool: boolean
  readonly claimTimeout: number | undefined
  readonly fail: boolean
}

const jobArb = fc.record({
  seconds: fc.integer({ min: 1, max: 3 }),
  write: fc.subarray(KEYS, { maxLength: 3 }),
  read: fc.subarray(KEYS, { maxLength: 2 }),
  pool: fc.boolean(),
  claimTimeout: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined })
})

const caseArb = fc.record({
  concurrency: fc.integer({ min: 1, max: 5 }),
  maxBypass: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
  failFast: fc.boolean(),
  failing: fc.option(fc.nat(), { nil: undefined }),
  jobs: fc.array(jobArb, { minLength: 1, maxLength: 14 })
})

const POOL_CAPACITY = 2

const request = (job: Job): Claims.Request =>
  Result.getOrThrow(Claims.normalize({ write: [...job.write], read: [...job.read] }, {}))

describe("claims under timeouts and stops (runs nobody observes)", () => {
  it.effect("an agent woken by a release that times out before a worker takes it lets the key go", () =>
    Effect.gen(function* () {
      // t=0: a runs, b and c queue for k, d takes the other slot. t=2: a ends; x (after a, the longer
      // path) takes the free slot, so b, woken holding k, waits for a slot. t=3: b's claim timeout.
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "a", { duration: "2 seconds" }, { claims: { write: ["k"] } }),
        Testing.scripted(
          timeline,
          "b",
          { duration: "1 second" },
          { claims: { write: ["k"] }, claimTimeout: "3 seconds" }
        ),
        Testing.scripted(timeline, "c", { duration: "1 second" }, { claims: { write: ["k"] } }),
        Testing.scripted(timeline, "d", { duration: "10 seconds" }),
        Testing.scripted(timeline, "x", { duration: "5 seconds" }, { dependsOn: ["a"], estimate: "10 seconds" })
      ]
      const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 2 }), { startImmediately: true })
      yield* Testing.advanceUntilDone(fiber, "1 second", "1 minute")
      const result = yield* Fiber.join(fiber)
      const tags = Object.fromEntries(result.outcomes.map((o) => [o.agentId, o._tag]))
      assert.deepStrictEqual(tags, {
        a: "Succeeded",
        b: "ClaimTimedOut",
        c: "Succeeded",
        d: "Succeeded",
        x: "Succeeded"
      })
      const b = result.outcomes.find((o) => o.agentId === "b")!
      assert.deepStrictEqual(b._tag === "ClaimTimedOut" ? b.blockers : undefined, [])
      const c = timeline.intervals.find((i) => i.agentId === "c")!
      const x = timeline.intervals.find((i) => i.agentId === "x")!
      assert.strictEqual(c.start, x.end)
    })
  )

  it.effect(
    "property: with claim timeouts and stops, holders never overlap, pools hold, every agent has one outcome and nothing stays held",
    () =>
      Effect.gen(function* () {
        const cases = fc.sample(caseArb, { numRuns: 150, seed: 8 })
        for (const c of cases) {
          const jobs: Array<Job> = c.jobs.map((job, i) => ({
            id: `j${i}`,
            seconds: job.seconds,
            write: job.write,
            read: job.read.filter((key) => !job.write.includes(key)),
            pool: job.pool,
            claimTimeout: job.claimTimeout,
            fail: c.failing !== undefined && c.failing % c.jobs.length === i
          }))
          yield* checkCase(jobs, c.concurrency, c.failFast, c.maxBypass)
        }
      })
  )
})

const checkCase = (jobs: ReadonlyArray<Job>, concurrency: number, failFast: boolean, maxBypass: number | undefined) =>
  Effect.gen(function* () {
    const label = JSON.stringify({ concurrency, failFast, maxBypass, jobs })
    const locks = ResourceLocks.makeMemory()
    const timeline = new Testing.Timeline()
    const agents = jobs.map((job) =>
      Testing.scripted(
        timeline,
        job.id,
        { duration: `${job.seconds} seconds`, ...(job.fail ? { fail: "boom" } : {}) },
        {
          claims: { write: [...job.write], read: [...job.read], ...(job.pool ? { pools: { gpu: 1 } } : {}) },
          ...(job.claimTimeout === undefined ? {} : { claimTimeout: `${job.claimTimeout} seconds` })
        }
      )
    )
    const options: Corral.Options = {
      concurrency,
      mode: failFast ? "fail-fast" : "settle",
      pools: { gpu: POOL_CAPACITY },
      ...(maxBypass === undefined ? {} : { maxBypass })
    }
    const fiber = yield* Effect.forkChild(
      Corral.run(agents, options).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks)),
      { startImmediately: true }
    )
    yield* Testing.advanceUntilDone(fiber, "1 second", "1 hour")
    const result = yield* Fiber.join(fiber)

    const ids = result.outcomes.map((outcome) => outcome.agentId).sort()
    assert.deepStrictEqual(ids, jobs.map((job) => job.id).sort(), `one outcome per agent: ${label}`)
    const started = new Map(timeline.intervals.map((i) => [i.agentId, i]))
    for (const outcome of result.outcomes) {
      if (outcome._tag === "ClaimTimedOut") {
        assert.isFalse(started.has(outcome.agentId), `${outcome.agentId}: ${label}`)
        // What blocked it held its claims then: it was running, or woken and starting that instant.
        for (const blocker of outcome.blockers) {
          if (blocker.holder.includes(" (reserved")) continue
          const holder = started.get(blocker.holder)
          const at = outcome.endedAt
          const held = holder !== undefined && holder.start <= at && at <= holder.end
          assert.isTrue(held, `${outcome.agentId} timed out at ${at} blocked by ${blocker.holder}: ${label}`)
        }
      }
      if (outcome._tag === "Succeeded") assert.isTrue(started.has(outcome.agentId), `${outcome.agentId}: ${label}`)
    }
    // Fail-fast stops at the first failure (a claim timeout counts): the rest may be cancelled or interrupted.
    if (!failFast || !result.outcomes.some((o) => o._tag === "Failed" || o._tag === "ClaimTimedOut")) {
      for (const outcome of result.outcomes) {
        const job = jobs.find((j) => j.id === outcome.agentId)!
        const expected = [
          job.fail ? "Failed" : "Succeeded",
          ...(job.claimTimeout === undefined ? [] : ["ClaimTimedOut"])
        ]
        assert.include(expected, outcome._tag, `${job.id}: ${label}`)
      }
    }

    const intervals = jobs.flatMap((job) => {
      const interval = started.get(job.id)
      return interval === undefined || interval.end === interval.start ? [] : [{ job, ...interval }]
    })
    for (let i = 0; i < intervals.length; i++) {
      for (let j = i + 1; j < intervals.length; j++) {
        const a = intervals[i]!
        const b = intervals[j]!
        if (Claims.conflicts(request(a.job), request(b.job)).length === 0) continue
        assert.isFalse(a.start < b.end && b.start < a.end, `${a.job.id} and ${b.job.id} overlap: ${label}`)
      }
    }
    for (const a of intervals) {
      if (!a.job.pool) continue
      const using = intervals.filter((b) => b.job.pool && b.start <= a.start && a.start < b.end).length
      assert.isAtMost(using, POOL_CAPACITY, `pool over capacity at ${a.start}: ${label}`)
    }

    const snapshot = yield* locks.snapshot
    assert.deepStrictEqual(snapshot.held, [], `nothing stays held: ${label}`)
    assert.deepStrictEqual(snapshot.waiting, [], `nobody stays waiting: ${label}`)
  })
