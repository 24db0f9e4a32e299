import { Claims, Corral, type RunResult } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import fc from "fast-check"

interface Job {
  readonly id: string
  readonly seconds: number
  readonly write: ReadonlyArray<string>
  readonly read: ReadonlyArray<string>
  readonly dependsOn?: ReadonlyArray<string>
}

interface Ran {
  readonly result: RunResult.RunResult
  readonly intervals: ReadonlyMap<string, { readonly start: number; readonly end: number }>
}

/** Runs `jobs` under the TestClock, with or without an event subscriber (the gate's two paths). */
const runJobs = (jobs: ReadonlyArray<Job>, concurrency: number, observe: boolean, maxBypass?: number) =>
  Effect.gen(function* () {
    const timeline = new Testing.Timeline()
    const agents = jobs.map((job) =>
      Testing.scripted(
        timeline,
        job.id,
        { duration: `${job.seconds} seconds` },
        { claims: { write: job.write, read: job.read }, dependsOn: job.dependsOn ?? [] }
      )
    )
    const options: Corral.Options = {
      concurrency,
      ...(maxBypass === undefined ? {} : { maxBypass }),
      ...(observe ? { onEvent: () => Effect.void } : {})
    }
    const t0 = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const fiber = yield* Effect.forkChild(Corral.run(agents, options), { startImmediately: true })
    yield* Testing.advanceUntilDone(fiber, "1 second")
    const result = yield* Fiber.join(fiber)
    const intervals = new Map(timeline.intervals.map((i) => [i.agentId, { start: i.start - t0, end: i.end - t0 }]))
    return { result, intervals } satisfies Ran
  })

const request = (job: Job): Claims.Request =>
  Result.getOrThrow(Claims.normalize({ write: job.write, read: job.read }, {}))

/** No two agents whose claims conflict ran at the same time. */
const assertExclusive = (jobs: ReadonlyArray<Job>, ran: Ran): void => {
  const requests = jobs.map(request)
  for (let i = 0; i < jobs.length; i++) {
    for (let j = i + 1; j < jobs.length; j++) {
      if (Claims.conflicts(requests[i]!, requests[j]!).length === 0) continue
      const a = ran.intervals.get(jobs[i]!.id)!
      const b = ran.intervals.get(jobs[j]!.id)!
      const overlap = a.start < b.end && b.start < a.end && a.end > a.start && b.end > b.start
      assert.isFalse(overlap, `${jobs[i]!.id} ${JSON.stringify(a)} and ${jobs[j]!.id} ${JSON.stringify(b)} overlap`)
    }
  }
}

/**
 * Whenever an agent ends, every agent still waiting whose claims conflict with nothing running and
 * whose dependencies are done starts at that instant while slots are free: a freed key's waiter that
 * can start is never left waiting (no bypass limit in play).
 */
const assertNoIdleWaiter = (jobs: ReadonlyArray<Job>, concurrency: number, ran: Ran): void => {
  const requests = jobs.map(request)
  const at = (id: string) => ran.intervals.get(id)!
  const instants = [...new Set([0, ...jobs.map((job) => at(job.id).end)])]
  for (const t of instants) {
    const running = jobs.flatMap((job, i) => {
      const { start, end } = at(job.id)
      return start <= t && (t < end || start === end) && !(start === end && start < t) ? [i] : []
    })
    if (running.length >= concurrency) continue
    jobs.forEach((job, i) => {
      if (at(job.id).start <= t) return
      const depsDone = (job.dependsOn ?? []).every((dep) => at(dep).end <= t)
      const free = running.every((r) => Claims.conflicts(requests[i]!, requests[r]!).length === 0)
      assert.isFalse(
        depsDone && free,
        `${job.id} could start at ${t} (running: ${running.map((r) => jobs[r]!.id).join(", ")}) but started at ${at(job.id).start}`
      )
    })
  }
}

describe("claim hand-offs", () => {
  const handoff: ReadonlyArray<Job> = [
    { id: "first", seconds: 2, write: ["k"], read: [] },
    { id: "second", seconds: 2, write: ["k", "c"], read: [] },
    { id: "third", seconds: 2, write: ["k"], read: [] },
    { id: "fourth", seconds: 2, write: ["k"], read: [] },
    { id: "delay", seconds: 3, write: [], read: [] },
    { id: "c-holder", seconds: 5, write: ["c"], read: [], dependsOn: ["delay"] },
    { id: "holder", seconds: 2, write: ["k"], read: [] }
  ]

  for (const observe of [false, true]) {
    it.effect(
      `a key's waiters take it in turn; one whose keys are free starts although the waiter ahead cannot (${observe ? "observed" : "unobserved"} run)`,
      () =>
        Effect.gen(function* () {
          // Four waiters queue for k behind "first" and take it in input order, 2 s each; "c-holder"
          // (ready at 3 s) waits for c until "second" ends and starts beside "third".
          const ran = yield* runJobs(handoff, 8, observe)
          assert.isTrue(ran.result.allSucceeded)
          const start = (id: string) => ran.intervals.get(id)!.start
          assert.deepStrictEqual(
            handoff.map((job) => [job.id, start(job.id)]),
            [
              ["first", 0],
              ["second", 2000],
              ["third", 4000],
              ["fourth", 6000],
              ["delay", 0],
              ["c-holder", 4000],
              ["holder", 8000]
            ]
          )
          assertExclusive(handoff, ran)
          assertNoIdleWaiter(handoff, 8, ran)
        })
    )
  }

  it.effect("a freed key goes to its best waiter that can start, past one waiting for another key", () =>
    Effect.gen(function* () {
      const jobs: ReadonlyArray<Job> = [
        { id: "holds-k", seconds: 2, write: ["k"], read: [] },
        { id: "wants-k", seconds: 2, write: ["k"], read: [] },
        { id: "wants-k-and-c", seconds: 1, write: ["k", "c"], read: [] },
        { id: "wants-k-too", seconds: 1, write: ["k"], read: [] },
        { id: "late", seconds: 3, write: [], read: [] },
        { id: "holds-c", seconds: 4, write: ["c"], read: [], dependsOn: ["late"] }
      ]
      for (const observe of [false, true]) {
        const ran = yield* runJobs(jobs, 8, observe)
        const start = (id: string) => ran.intervals.get(id)!.start
        // At 4 s "wants-k" ends; "wants-k-and-c" is next for k but "holds-c" took c at 3 s, so
        // "wants-k-too" takes k at once instead of waiting behind it.
        assert.deepStrictEqual(
          [start("holds-k"), start("wants-k"), start("holds-c"), start("wants-k-too"), start("wants-k-and-c")],
          [0, 2000, 3000, 4000, 7000]
        )
        assertExclusive(jobs, ran)
        assertNoIdleWaiter(jobs, 8, ran)
      }
    })
  )

  const KEYS = ["a", "b", "c", "src/", "src/x.ts", "src/y.ts"]
  const jobArb = fc.record({
    seconds: fc.integer({ min: 1, max: 3 }),
    write: fc.subarray(KEYS, { maxLength: 3 }),
    read: fc.subarray(KEYS, { maxLength: 2 })
  })

  /** Generated jobs with ids; a key a job writes is not also among its reads. */
  const numbered = (
    generated: ReadonlyArray<{ readonly seconds: number; readonly write: Array<string>; readonly read: Array<string> }>
  ) =>
    generated.map((job, i) => ({
      id: `j${i}`,
      seconds: job.seconds,
      write: job.write,
      read: job.read.filter((key) => !job.write.includes(key))
    }))

  it.effect("property: holders of a key never overlap, and a waiter that can start is never left idle", () =>
    Effect.gen(function* () {
      const cases = fc.sample(
        fc.record({
          concurrency: fc.integer({ min: 1, max: 5 }),
          jobs: fc.array(jobArb, { minLength: 1, maxLength: 14 }),
          observe: fc.boolean()
        }),
        { numRuns: 150, seed: 19 }
      )
      for (const c of cases) {
        const jobs = numbered(c.jobs)
        const ran = yield* runJobs(jobs, c.concurrency, c.observe, 1_000_000)
        assert.isTrue(ran.result.allSucceeded)
        assertExclusive(jobs, ran)
        assertNoIdleWaiter(jobs, c.concurrency, ran)
      }
    })
  )

  /** Asserts that no job was overtaken more than `maxBypass` times on any one of its keys (every job is queued at 0 in input order). */
  const assertBypassBound = (jobs: ReadonlyArray<Job>, ran: Ran, maxBypass: number, label: string): void => {
    const requests = jobs.map(request)
    const start = (i: number) => ran.intervals.get(jobs[i]!.id)!.start
    jobs.forEach((_, w) => {
      for (const claim of requests[w]!.keys) {
        const one: Claims.Request = { keys: [claim], pools: [] }
        let overtakes = 0
        for (let g = w + 1; g < jobs.length; g++) {
          if (start(g) < start(w) && Claims.conflicts(one, requests[g]!).length > 0) overtakes++
        }
        assert.isAtMost(overtakes, maxBypass, `${jobs[w]!.id} on ${claim.key} (${label})`)
      }
    })
  }

  /** Runs each case with its `maxBypass`: every job succeeds, holders never overlap, the per-key bound holds. */
  const checkBypassCases = (
    cases: ReadonlyArray<{
      readonly concurrency: number
      readonly maxBypass: number
      readonly observe: boolean
      readonly jobs: ReadonlyArray<{
        readonly seconds: number
        readonly write: Array<string>
        readonly read: Array<string>
      }>
    }>
  ) =>
    Effect.forEach(
      cases,
      (c) => {
        const jobs = numbered(c.jobs)
        return Effect.map(runJobs(jobs, c.concurrency, c.observe, c.maxBypass), (ran) => {
          assert.isTrue(ran.result.allSucceeded)
          assertExclusive(jobs, ran)
          assertBypassBound(jobs, ran, c.maxBypass, JSON.stringify(c))
        })
      },
      { discard: true }
    )

  it.effect("property: many waiters on three hot keys, reserved and handed over, never overlap and all run", () =>
    Effect.gen(function* () {
      // Long queues per key and a small `maxBypass`: reservations pass to leases often, so a lease's
      // list of waiters names an agent more than once (≈ 100 times over these cases), and releases
      // walk such lists.
      const cases = fc.sample(
        fc.record({
          concurrency: fc.integer({ min: 2, max: 6 }),
          maxBypass: fc.integer({ min: 1, max: 3 }),
          jobs: fc.array(
            fc.record({
              seconds: fc.integer({ min: 1, max: 2 }),
              write: fc.subarray(["a", "b", "c"], { minLength: 1, maxLength: 3 }),
              read: fc.constant<Array<string>>([])
            }),
            { minLength: 10, maxLength: 30 }
          ),
          observe: fc.boolean()
        }),
        { numRuns: 60, seed: 29 }
      )
      yield* checkBypassCases(cases)
    })
  )

  it.effect("property: no waiter is overtaken more than `maxBypass` times on any one of its keys", () =>
    Effect.gen(function* () {
      const cases = fc.sample(
        fc.record({
          concurrency: fc.integer({ min: 1, max: 5 }),
          maxBypass: fc.integer({ min: 1, max: 4 }),
          jobs: fc.array(jobArb, { minLength: 1, maxLength: 16 }),
          observe: fc.boolean()
        }),
        { numRuns: 150, seed: 23 }
      )
      yield* checkBypassCases(cases)
    })
  )
})
