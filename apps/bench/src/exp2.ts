import { Agent, Corral } from "@corral/core"
import { Effect } from "effect"
for (let r = 0; r < 4; r++) {
  const agents = Array.from({ length: 1000 }, (_, i) => Agent.make(`a${i}`, { run: Effect.sleep(10) }))
  let t0 = performance.now()
  await Effect.runPromise(Corral.run(agents, { concurrency: 100 }))
  const corral = performance.now() - t0
  t0 = performance.now()
  await Effect.runPromise(Effect.forEach(agents, () => Effect.sleep(10), { concurrency: 100, discard: true }))
  const fe = performance.now() - t0
  t0 = performance.now()
  let next = 0
  await Promise.all(Array.from({ length: 100 }, async () => { while (next < 1000) { next++; await new Promise((r) => setTimeout(r, 10)) } }))
  const pool = performance.now() - t0
  console.log(`corral ${corral.toFixed(0)} forEach ${fe.toFixed(0)} pool ${pool.toFixed(0)}`)
}
