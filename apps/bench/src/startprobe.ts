/**
 * When a run's agents start and when it returns, against `Effect.forEach` of the same effects:
 * `node src/startprobe.ts [agents] [sleepMs] [reps]` (default 3 × 20 ms, 40 pairs after 10 warm-up
 * pairs) runs `agents` agents at concurrency `agents` (one wave), corral and `Effect.forEach`
 * alternating, each agent recording `performance.now()` when its effect starts and when its sleep
 * ends, and prints the medians of: the first agent's start and the last agent's start after the
 * call (`Agent.make` included for corral), and the time from the last agent's end to the run's
 * return. `CORRAL_CORE` names another copy of `packages/core/src/index.ts` (A/B in alternating
 * processes).
 */
import * as Effect from "effect/Effect"

const { Agent, Corral }: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")

const agents = Number(process.argv[2] ?? 3)
const sleepMs = Number(process.argv[3] ?? 20)
const reps = Number(process.argv[4] ?? 40)

type Kind = "corral" | "forEach"

interface Sample {
  readonly first: number
  readonly lastStart: number
  readonly tail: number
}

const once = async (kind: Kind): Promise<Sample> => {
  let first = Number.POSITIVE_INFINITY
  let lastStart = 0
  let lastEnd = 0
  const body = Effect.sync(() => {
    const now = performance.now()
    first = Math.min(first, now)
    lastStart = Math.max(lastStart, now)
  }).pipe(
    Effect.andThen(Effect.sleep(sleepMs)),
    Effect.andThen(
      Effect.sync(() => {
        lastEnd = Math.max(lastEnd, performance.now())
      })
    )
  )
  const indices = Array.from({ length: agents }, (_, i) => i)
  const t0 = performance.now()
  if (kind === "corral") {
    const made = indices.map((i) => Agent.make(`a${i}`, { run: body }))
    await Effect.runPromise(Corral.run(made, { concurrency: agents }))
  } else {
    await Effect.runPromise(Effect.forEach(indices, () => body, { concurrency: agents, discard: true }))
  }
  return { first: first - t0, lastStart: lastStart - t0, tail: performance.now() - lastEnd }
}

const median = (values: Array<number>): string => values.sort((x, y) => x - y)[values.length >> 1]!.toFixed(3)

const samples: Record<Kind, Array<Sample>> = { corral: [], forEach: [] }
for (let i = 0; i < 10 + reps; i++) {
  for (const kind of ["corral", "forEach"] as const) {
    const sample = await once(kind)
    if (i >= 10) samples[kind].push(sample)
  }
}
for (const kind of ["corral", "forEach"] as const) {
  const of = (key: keyof Sample) => median(samples[kind].map((sample) => sample[key]))
  console.log(`${kind.padEnd(8)} first ${of("first")} ms  last start ${of("lastStart")} ms  tail ${of("tail")} ms`)
}
