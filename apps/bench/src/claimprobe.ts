/**
 * The `claims` bench case outside the harness, for A/B comparisons in alternating processes:
 * `node src/claimprobe.ts cpu [runs] [warm-up]` runs corral on the 2,000-task workload in real time
 * and prints the median `process.cpuUsage()` per run; `node src/claimprobe.ts virtual [maxBypass]`
 * runs it once under `TestClock` (exact 2 ms, no CPU cost) and prints the makespan against the bound.
 */
import { Agent, Corral } from "@corral/core"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import { busiestKeyCount, claimJobs } from "./lib/workload.ts"

const jobs = claimJobs(7, 2000, 50)
const workMs = 2
const concurrency = 32
const bound = Math.max((jobs.length * workMs) / concurrency, busiestKeyCount(jobs) * workMs)
const [mode = "cpu", a, b] = process.argv.slice(2)

const agents = (ends?: Array<number>) =>
  jobs.map((job, index) =>
    Agent.make(job.id, {
      run: Effect.andThen(
        Effect.sleep(workMs),
        Effect.clockWith((clock) => Effect.sync(() => void ends?.splice(index, 1, clock.currentTimeMillisUnsafe())))
      ),
      claims: { write: job.keys }
    })
  )

const median = (values: Array<number>) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)]!

if (mode === "cpu") {
  const runs = Number(a ?? 20)
  const warm = Number(b ?? 5)
  const cpu: Array<number> = []
  for (let i = 0; i < warm + runs; i++) {
    const list = agents()
    const before = process.cpuUsage()
    const result = await Effect.runPromise(Corral.run(list, { concurrency }))
    const used = process.cpuUsage(before)
    if (!result.allSucceeded) throw new Error("a run failed")
    if (i >= warm) cpu.push((used.user + used.system) / 1000)
  }
  console.log(JSON.stringify({ cpuMsPerRun: median(cpu), min: Math.min(...cpu), max: Math.max(...cpu) }))
} else {
  const maxBypass = a === undefined ? undefined : Number(a)
  const ends = new Array<number>(jobs.length).fill(0)
  const makespan = await Effect.runPromise(
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(
        Corral.run(agents(ends), { concurrency, ...(maxBypass === undefined ? {} : { maxBypass }) }),
        { startImmediately: true }
      )
      yield* Effect.yieldNow
      while (fiber.pollUnsafe() === undefined) {
        yield* TestClock.adjust(1)
        yield* Effect.yieldNow
      }
      const result = yield* Fiber.join(fiber)
      if (!result.allSucceeded) throw new Error("a run failed")
      return Math.max(...ends)
    }).pipe(Effect.provide(TestClock.layer()))
  )
  console.log(JSON.stringify({ makespanMs: makespan, bound, ratio: Number((makespan / bound).toFixed(3)) }))
}
