import { Agent, Corral } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { busiestKeyCount, claimJobs } from "./lib/workload.ts"

const jobs = claimJobs(7, 2000, 50)
const bound = Math.max(busiestKeyCount(jobs) * 2, (2000 * 2) / 32)
for (const maxBypass of [undefined, 32, 128, 512, 100000]) {
  const agents = jobs.map((j) => Agent.make(j.id, { run: Effect.sleep(2), claims: { write: j.keys } }))
  const virtual = await Effect.runPromise(
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency: 32, maxBypass }), { startImmediately: true })
      yield* Testing.advanceUntilDone(fiber, "1 millis")
      return (yield* Fiber.join(fiber)).wallMs
    }).pipe(Effect.provide(TestClock.layer()))
  )
  const reals = []
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now()
    await Effect.runPromise(Corral.run(agents, { concurrency: 32, maxBypass }))
    reals.push(performance.now() - t0)
  }
  const real = reals.sort((a, b) => a - b)[1]!
  console.log(`maxBypass ${maxBypass}: virtual ${virtual} ms = ${(virtual / bound).toFixed(2)}x; real ${real.toFixed(0)} ms = ${(real / bound).toFixed(2)}x (bound ${bound})`)
}
