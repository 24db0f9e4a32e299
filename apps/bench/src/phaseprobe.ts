/**
 * CPU by phase of a run of sleeping agents (default io-scaling's 1,000 × 10 ms @100):
 * `node --expose-gc src/phaseprobe.ts [mode] [runs] [n] [sleepMs] [concurrency]`. Every agent's
 * effect reads `process.cpuUsage()` when it starts and when its sleep ends; a run is split into
 * making the agents (the peer: its array), up to the first agent's start, first start to last end,
 * and last end to the return. Medians of the second half of the runs (each after a young GC), in
 * ms. `mode`: `corral` or `forEach`. `CORRAL_CORE` names another copy of
 * `packages/core/src/index.ts` (A/B in alternating processes).
 */
import * as Effect from "effect/Effect"
import { waveArgs } from "./lib/waveArgs.ts"

const { mode, count: runs, n, sleepMs, concurrency, Agent, Corral } = await waveArgs(40)

const us = () => {
  const u = process.cpuUsage()
  return u.user + u.system
}
let first = 0
let last = 0
const work = Effect.suspend(() => {
  if (first === 0) first = us()
  return Effect.andThen(
    Effect.sleep(sleepMs),
    Effect.sync(() => {
      last = us()
    })
  )
})

const once = async (): Promise<Array<number>> => {
  first = 0
  const t0 = us()
  const items = Array.from({ length: n }, (_, i) => i)
  if (mode === "forEach") {
    const t1 = us()
    await Effect.runPromise(Effect.forEach(items, () => work, { concurrency, discard: true }))
    const t2 = us()
    return [t1 - t0, first - t1, last - first, t2 - last]
  }
  const agents = items.map((i) => Agent.make(`io${i}`, { run: work }))
  const t1 = us()
  const result = await Effect.runPromise(Corral.run(agents, { concurrency }))
  const t2 = us()
  if (!result.allSucceeded) throw new Error("an agent did not succeed")
  return [t1 - t0, first - t1, last - first, t2 - last]
}

const gc = (globalThis as { gc?: (options: { type: "minor" }) => void }).gc
const samples: Array<Array<number>> = []
for (let run = 0; run < runs; run++) {
  await new Promise((resolve) => setImmediate(resolve))
  gc?.({ type: "minor" })
  samples.push(await once())
}
const half = samples.slice(Math.floor(runs / 2))
const median = (i: number) => half.map((s) => s[i]!).sort((a, b) => a - b)[Math.floor(half.length / 2)]! / 1000
console.log(
  JSON.stringify({ mode, makeMs: median(0), toFirstMs: median(1), agentsMs: median(2), toReturnMs: median(3) })
)
process.exit(0)
