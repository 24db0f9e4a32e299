import { Claims, Corral, ResourceLocks } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Result } from "effect"
import fc from "fast-check"

// A run nobody observes counts each parked agent's conflicts with the holders of its keys, by key,
// and wakes it when the count reaches zero; a key leaves the run's view once the lock service has
// released it. Agents blocked by another run's lease wait for that lease instead, uncounted, and are
// counted again when a check finds a holder in their own run. These properties mix the two.

const KEYS = ["a", "b", "src/", "src/x.ts", "src/y.ts"]

interface Job {
  readonly id: string
  readonly seconds: number
  readonly write: ReadonlyArray<string>
  readonly read: ReadonlyArray<string>
}

const jobsArb = fc.array(
  fc.record({
    seconds: fc.integer({ min: 1, max: 3 }),
    write: fc.subarray(KEYS, { maxLength: 2 }),
    read: fc.subarray(KEYS, { maxLength: 2 })
  }),
  { minLength: 1, maxLength: 10 }
)

const numbered = (
  run: string,
  generated: ReadonlyArray<{ readonly seconds: number; readonly write: Array<string>; readonly read: Array<string> }>
): ReadonlyArray<Job> =>
  generated.map((job, i) => ({
    id: `${run}-${i}`,
    seconds: job.seconds,
    write: job.write,
    read: job.read.filter((key) => !job.write.includes(key))
  }))

const request = (job: Job): Claims.Request =>
  Result.getOrThrow(Claims.normalize({ write: job.write, read: job.read }, {}))

describe("claims counted by key (runs nobody observes)", () => {
  it.effect(
    "property: two runs on one lock service, with path keys and readers: holders never overlap, all run, nothing stays held",
    () =>
      Effect.gen(function* () {
        const cases = fc.sample(
          fc.record({
            one: jobsArb,
            two: jobsArb,
            concurrency: fc.integer({ min: 1, max: 4 }),
            maxBypass: fc.integer({ min: 1, max: 4 })
          }),
          { numRuns: 120, seed: 9 }
        )
        for (const c of cases) {
          const locks = ResourceLocks.makeMemory()
          const timeline = new Testing.Timeline()
          const runs = [numbered("one", c.one), numbered("two", c.two)]
          const fibers = []
          for (const [r, jobs] of runs.entries()) {
            const agents = jobs.map((job) =>
              Testing.scripted(
                timeline,
                job.id,
                { duration: `${job.seconds} seconds` },
                { claims: { write: job.write, read: job.read } }
              )
            )
            const run = Corral.run(agents, {
              runId: `run-${r}`,
              concurrency: c.concurrency,
              maxBypass: c.maxBypass
            }).pipe(Effect.provideService(ResourceLocks.ResourceLocks, locks))
            fibers.push(yield* Effect.forkChild(run, { startImmediately: true }))
          }
          for (const fiber of fibers) yield* Testing.advanceUntilDone(fiber, "1 second")
          const label = JSON.stringify(c)
          for (const fiber of fibers) assert.isTrue((yield* Fiber.join(fiber)).allSucceeded, label)
          const jobs = runs.flat()
          const intervals = new Map(timeline.intervals.map((i) => [i.agentId, i]))
          const requests = jobs.map(request)
          for (let i = 0; i < jobs.length; i++) {
            for (let j = i + 1; j < jobs.length; j++) {
              if (Claims.conflicts(requests[i]!, requests[j]!).length === 0) continue
              const a = intervals.get(jobs[i]!.id)!
              const b = intervals.get(jobs[j]!.id)!
              assert.isFalse(a.start < b.end && b.start < a.end, `${jobs[i]!.id} and ${jobs[j]!.id} overlap: ${label}`)
            }
          }
          const snapshot = yield* locks.snapshot
          assert.deepStrictEqual(snapshot.held, [], `nothing stays held: ${label}`)
          assert.deepStrictEqual(snapshot.waiting, [], `nobody stays waiting: ${label}`)
        }
      })
  )
})
