/**
 * CPU and allocation of the in-memory ledger per agent, for A/B comparisons in alternating processes
 * on a loaded machine: `node --expose-gc src/ledgerprobe.ts none|memory|counting [agents] [runs] [warm-up runs]`
 * runs `ledger`'s no-op case (a fresh in-memory ledger per run, `startRun`, 1,000 no-op agents at
 * concurrency 8 recording every event, `finishRun`; `counting` is a subscriber that only counts),
 * 100 warm-up runs (by default), then `runs` runs each after a young-generation GC, and prints the median and
 * quartiles of CPU µs per agent (`process.cpuUsage()`) and the median bytes allocated per agent
 * (heap growth over a run with no scavenge in it; run with `--max-semi-space-size=64` so none is).
 */
import { Agent, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { settleYoung } from "./lib/heap.ts"
import { runStart } from "./scenarios/ledger.ts"

const mode = (process.argv[2] ?? "memory") as "none" | "memory" | "counting"
const n = Number(process.argv[3] ?? 1000)
const runs = Number(process.argv[4] ?? 300)
let serial = 0

const agentsOf = () => Array.from({ length: n }, (_, i) => Agent.make(`a${i}`, { run: Effect.void }))
const oneRun = Effect.gen(function* () {
  const runId = `probe-${serial++}`
  const agents = agentsOf()
  if (mode === "none") {
    const u0 = process.cpuUsage()
    const h0 = process.memoryUsage().heapUsed
    yield* Corral.run(agents, { runId, concurrency: 8 })
    return [process.cpuUsage(u0), process.memoryUsage().heapUsed - h0] as const
  }
  if (mode === "counting") {
    let count = 0
    const u0 = process.cpuUsage()
    const h0 = process.memoryUsage().heapUsed
    yield* Corral.run(agents, { runId, concurrency: 8, onEvent: () => Effect.sync(() => void count++) })
    return [process.cpuUsage(u0), process.memoryUsage().heapUsed - h0] as const
  }
  return yield* Effect.scoped(
    Effect.gen(function* () {
      const ledger = Context.get(yield* Layer.build(RunLedger.layerMemory), RunLedger.RunLedger)
      const u0 = process.cpuUsage()
      const h0 = process.memoryUsage().heapUsed
      yield* ledger.startRun(runStart(runId, n))
      yield* Corral.run(agents, { runId, concurrency: 8, onEvent: (event) => ledger.record(runId, event) })
      yield* ledger.finishRun(runId, "succeeded", Date.now())
      return [process.cpuUsage(u0), process.memoryUsage().heapUsed - h0] as const
    })
  )
})

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.floor((sorted.length - 1) * q)]!

const warm = Number(process.argv[5] ?? 100)
for (let i = 0; i < warm; i++) await Effect.runPromise(oneRun)
const cpu: Array<number> = []
const bytes: Array<number> = []
for (let i = 0; i < runs; i++) {
  await settleYoung()
  const [u, heap] = await Effect.runPromise(oneRun)
  cpu.push((u.user + u.system) / n)
  if (heap > 0) bytes.push(heap / n)
}
cpu.sort((a, b) => a - b)
bytes.sort((a, b) => a - b)
console.log(
  JSON.stringify({
    mode,
    cpuUsPerAgent: quantile(cpu, 0.5),
    q1: quantile(cpu, 0.25),
    q3: quantile(cpu, 0.75),
    bytesPerAgent: bytes.length === 0 ? null : Math.round(quantile(bytes, 0.5))
  })
)
