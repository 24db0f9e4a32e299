/**
 * CPU of io-scaling's 1,000 × 10 ms @100 case in the sequence the bench samples one approach
 * (without the other approaches' runs in between), for A/B comparisons in alternating processes: `node --expose-gc src/waveprobe.ts [mode] [reps] [n] [sleepMs] [concurrency]`.
 * Each repetition runs once after two full GCs (the bench's "after GC" sample), twice untimed, and
 * once after a young GC (its steady sample); prints the medians of `process.cpuUsage()` over both
 * samples. `mode`: `corral` (`Agent.make` included) or `forEach`. `CORRAL_CORE` names another copy of
 * `packages/core/src/index.ts`.
 */
import * as Effect from "effect/Effect"
import { waveArgs } from "./lib/waveArgs.ts"

const { mode, count: reps, n, sleepMs, concurrency, Agent, Corral } = await waveArgs(15)

const once = async (): Promise<void> => {
  const items = Array.from({ length: n }, (_, i) => i)
  if (mode === "forEach") {
    await Effect.runPromise(Effect.forEach(items, () => Effect.sleep(sleepMs), { concurrency, discard: true }))
    return
  }
  const agents = items.map((i) => Agent.make(`io${i}`, { run: Effect.sleep(sleepMs) }))
  const result = await Effect.runPromise(Corral.run(agents, { concurrency }))
  if (!result.allSucceeded) throw new Error("an agent did not succeed")
}

const gc = (globalThis as { gc?: (options?: { type: "minor" | "major" }) => void }).gc!
const turn = () => new Promise((resolve) => setImmediate(resolve))
const cpu = async (): Promise<number> => {
  const before = process.cpuUsage()
  await once()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / 1000
}
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
await once()
const afterGc: Array<number> = []
const steady: Array<number> = []
for (let rep = 0; rep < reps; rep++) {
  await turn()
  gc()
  gc()
  afterGc.push(await cpu())
  await once()
  await once()
  await turn()
  gc({ type: "minor" })
  steady.push(await cpu())
}
console.log(
  JSON.stringify({
    mode,
    afterGcMs: median(afterGc),
    steadyMs: median(steady),
    steady: steady.map((x) => Number(x.toFixed(1)))
  })
)
process.exit(0)
