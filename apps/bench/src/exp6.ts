import { Agent, Corral } from "@corral/core"
import { Effect } from "effect"
import { claimJobs } from "./lib/workload.ts"
const jobs = claimJobs(7, 2000, 50)
for (let i = 0; i < 4; i++) {
  const agents = jobs.map((j) => Agent.make(j.id, { run: Effect.sleep(2), claims: { write: j.keys } }))
  const t0 = performance.now()
  await Effect.runPromise(Corral.run(agents, { concurrency: 32 }))
  console.log((performance.now() - t0).toFixed(0))
}
