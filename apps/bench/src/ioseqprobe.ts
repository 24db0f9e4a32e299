/**
 * Where the 3 × 100 ms io-scaling case's time goes, in the bench's own sample sequence:
 * `node --expose-gc src/ioseqprobe.ts [reps]` runs the io-scaling scenario through the harness
 * (warm-up pass on the 1,000 × 10 ms case, after-GC samples, untimed runs, young GC, steady samples)
 * with `Effect.forEach` and corral stamping `performance.now()` at the call, at each agent's start,
 * at its sleep's end and at the resolve, and prints, per phase of the 3 × 100 ms case, the medians
 * of: the last start after the call, the latest sleep end's lateness, and the resolve after the last end.
 * `CORRAL_CORE` names another copy of `packages/core/src/index.ts` (A/B in alternating processes).
 */
import * as fs from "node:fs"
import * as Effect from "effect/Effect"
import { resultsDir, runScenario } from "./harness.ts"
import { withCpu } from "./lib/cpu.ts"
import { core, runAgents } from "./lib/core.ts"
import { timed } from "./lib/async.ts"
import { ioScaling } from "./scenarios/io-scaling.ts"
import type { Approach } from "./types.ts"

interface Params {
  readonly tasks: number
  readonly sleepMs: number
  readonly concurrency: number
}

interface Stamps {
  call: number
  starts: Array<number>
  ends: Array<number>
  resolved: number
}

const recorded: Record<string, Array<Stamps>> = { forEach: [], corral: [] }

const indices = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

const agentBody = (stamps: Stamps, sleepMs: number) =>
  Effect.suspend(() => {
    stamps.starts.push(performance.now())
    return Effect.andThen(
      Effect.sleep(sleepMs),
      Effect.sync(() => {
        stamps.ends.push(performance.now())
      })
    )
  })

const markers = process.env.IOSEQ_MARK === "1"
const mark = (text: string): void => {
  if (markers) fs.writeSync(1, `@@ ${text}\n`)
}

const fresh = (): Stamps => ({ call: 0, starts: [], ends: [], resolved: 0 })

const forEach: Approach<Params> = {
  name: "Effect.forEach",
  run: (p, { signal }) => {
    const stamps = fresh()
    if (p.tasks === 3) recorded.forEach!.push(stamps)
    if (p.tasks === 3) mark(`begin forEach ${recorded.forEach!.length}`)
    return timed(() => {
      stamps.call = performance.now()
      const work = Effect.forEach(indices(p.tasks), () => agentBody(stamps, p.sleepMs), {
        concurrency: p.concurrency,
        discard: true
      })
      return Effect.runPromise(work, { signal }).then(() => {
        stamps.resolved = performance.now()
        mark("end")
      })
    })
  }
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    const stamps = fresh()
    if (p.tasks === 3) recorded.corral!.push(stamps)
    if (p.tasks === 3) mark(`begin corral ${recorded.corral!.length}`)
    return timed(() => {
      stamps.call = performance.now()
      const agents = indices(p.tasks).map((i) => Agent.make(`io${i}`, { run: agentBody(stamps, p.sleepMs) }))
      return runAgents(agents, { concurrency: p.concurrency }, signal).then(() => {
        stamps.resolved = performance.now()
        mark("end")
      })
    })
  }
}

const reps = Number(process.argv[2] ?? 9)
const others = ioScaling.approaches.filter((a) => a.name !== "Effect.forEach" && a.name !== "corral")
await runScenario(
  { ...ioScaling, name: "ioseqprobe", approaches: [...others, withCpu(forEach), withCpu(corral)] },
  { quick: false, reps }
)
// runScenario saved the probe's results beside the scenarios'; BENCHMARKS.md is written from every file there
fs.rmSync(new URL("ioseqprobe.json", resultsDir), { force: true })

const median = (values: ReadonlyArray<number>): string =>
  [...values].sort((x, y) => x - y)[values.length >> 1]!.toFixed(3)

const phases = (all: ReadonlyArray<Stamps>) => ({
  afterGc: all.slice(0, reps),
  steady: all.slice(reps + 2)
})

for (const [kind, all] of Object.entries(recorded)) {
  for (const [phase, samples] of Object.entries(phases(all))) {
    const lastStart = samples.map((s) => Math.max(...s.starts) - s.call)
    const firstStart = samples.map((s) => Math.min(...s.starts) - s.call)
    const late = samples.map((s) => Math.max(...s.ends) - Math.max(...s.starts) - 100)
    const tail = samples.map((s) => s.resolved - Math.max(...s.ends))
    const total = samples.map((s) => s.resolved - s.call)
    console.log(
      `${kind.padEnd(8)} ${phase.padEnd(8)} n ${samples.length}  first ${median(firstStart)}  last start ${median(lastStart)}  ` +
        `late ${median(late)}  tail ${median(tail)}  total ${median(total)}   ` +
        `all totals ${total.map((t) => t.toFixed(1)).join(" ")}`
    )
  }
}
