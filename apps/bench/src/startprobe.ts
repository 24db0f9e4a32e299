/**
 * When a run's agents start and when it returns, against `Effect.forEach` of the same effects and
 * plain timers: `node src/startprobe.ts [agents] [sleepMs] [reps]` (default 3 × 20 ms, 40 rounds
 * after 10 warm-up rounds) runs `agents` agents at concurrency `agents` (one wave), corral,
 * `Effect.forEach` and `timers` (a `setTimeout` promise per agent, no Effect) alternating, each agent
 * recording `performance.now()` when its work starts and when its sleep ends, and prints the medians
 * of: the first agent's start and the last agent's start after the call (`Agent.make` included for
 * corral), the latest sleep's lateness (its end − its start − `sleepMs`; for `timers` Node.js's
 * timer granularity alone, for the others also the ends that ran before it in the same burst), how
 * many agents started in a later event-loop turn than the call, the time from the last agent's end
 * to the run's return, and the whole call.
 * `CORRAL_CORE` names another copy of `packages/core/src/index.ts` (A/B in alternating processes).
 */
import * as Effect from "effect/Effect"

const { Agent, Corral }: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")

const agents = Number(process.argv[2] ?? 3)
const sleepMs = Number(process.argv[3] ?? 20)
const reps = Number(process.argv[4] ?? 40)

type Kind = "corral" | "forEach" | "timers"
const kinds: ReadonlyArray<Kind> = ["corral", "forEach", "timers"]

interface Sample {
  readonly first: number
  readonly lastStart: number
  readonly late: number
  /** Agents that started after a `setImmediate` queued at the call had run (a later event-loop turn). */
  readonly laterTurn: number
  readonly tail: number
  readonly total: number
}

const once = async (kind: Kind): Promise<Sample> => {
  let first = Number.POSITIVE_INFINITY
  let lastStart = 0
  let lastEnd = 0
  let late = 0
  let turned = false
  let laterTurn = 0
  const started = (): number => {
    if (turned) laterTurn++
    const now = performance.now()
    first = Math.min(first, now)
    lastStart = Math.max(lastStart, now)
    return now
  }
  const ended = (start: number): void => {
    const now = performance.now()
    lastEnd = Math.max(lastEnd, now)
    late = Math.max(late, now - start - sleepMs)
  }
  const body = Effect.suspend(() => {
    const start = started()
    return Effect.andThen(
      Effect.sleep(sleepMs),
      Effect.sync(() => ended(start))
    )
  })
  const timer = (): Promise<void> => {
    const start = started()
    return new Promise((resolve) => setTimeout(resolve, sleepMs)).then(() => ended(start))
  }
  const indices = Array.from({ length: agents }, (_, i) => i)
  setImmediate(() => {
    turned = true
  })
  const t0 = performance.now()
  if (kind === "corral") {
    const made = indices.map((i) => Agent.make(`a${i}`, { run: body }))
    await Effect.runPromise(Corral.run(made, { concurrency: agents }))
  } else if (kind === "forEach") {
    await Effect.runPromise(Effect.forEach(indices, () => body, { concurrency: agents, discard: true }))
  } else {
    await Promise.all(indices.map(timer))
  }
  const end = performance.now()
  return { first: first - t0, lastStart: lastStart - t0, late, laterTurn, tail: end - lastEnd, total: end - t0 }
}

const median = (values: Array<number>): string => values.sort((x, y) => x - y)[values.length >> 1]!.toFixed(3)

const samples: Record<Kind, Array<Sample>> = { corral: [], forEach: [], timers: [] }
for (let i = 0; i < 10 + reps; i++) {
  for (const kind of kinds) {
    const sample = await once(kind)
    if (i >= 10) samples[kind].push(sample)
  }
}
for (const kind of kinds) {
  const of = (key: keyof Sample) => median(samples[kind].map((sample) => sample[key]))
  console.log(
    `${kind.padEnd(8)} first ${of("first")} ms  last start ${of("lastStart")} ms  late ${of("late")} ms  later turn ${of("laterTurn")}  ` +
      `tail ${of("tail")} ms  total ${of("total")} ms`
  )
}
