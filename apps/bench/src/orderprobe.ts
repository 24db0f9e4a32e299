/**
 * Whether the run before a scheduling sample changes it: `node --expose-gc src/orderprobe.ts N reps`
 * runs corral's yielding-agent case of `scheduling` (N agents at concurrency 64, `Agent.make`
 * included) right after another corral run and right after a p-queue run (whose ≈ 1 KB per task
 * is old-generation garbage when it returns), alternating, each after the event-loop turn and
 * young-generation GC the harness uses for steady-state samples, and prints per sample: CPU µs per
 * agent (`process.cpuUsage()`, every thread), main-thread GC pause µs per agent (`v8.GCProfiler`),
 * full GCs in the run, and wall-clock µs per agent. On a loaded machine judge by the CPU column.
 */
import { settleYoung } from "./lib/heap.ts"
import { scheduling } from "./scenarios/scheduling.ts"

const n = Number(process.argv[2] ?? 100_000)
const reps = Number(process.argv[3] ?? 8)
const params = { n, concurrency: 64, profile: false, yielding: true }
const approach = (name: string) => scheduling.approaches.find((a) => a.name === name)!
const corral = approach("corral")
const pqueue = approach("p-queue")
const signal = new AbortController().signal

const run = async (which: typeof corral) => {
  await settleYoung()
  return (await which.run(params, { signal })).metrics ?? {}
}

const line = (m: Readonly<Record<string, number>>): string =>
  [m.cpuUsPerTask, m.gcUsPerTask, m.majorGcs, m.usPerTask].map((v) => (v ?? Number.NaN).toFixed(2)).join("/")

for (let i = 0; i < 3; i++) {
  await run(corral)
  await run(pqueue)
}
const afterCorral: Array<string> = []
const afterPqueue: Array<string> = []
for (let rep = 0; rep < reps; rep++) {
  await run(corral)
  afterCorral.push(line(await run(corral)))
  await run(pqueue)
  afterPqueue.push(line(await run(corral)))
}
console.log(`N = ${n}: CPU µs/agent / GC pause µs/agent / full GCs / wall µs/agent`)
console.log(`after corral:  ${afterCorral.join("  ")}`)
console.log(`after p-queue: ${afterPqueue.join("  ")}`)
process.exit(0)
