import * as Effect from "effect/Effect"
import pLimit from "p-limit"
import { fixed } from "../format.ts"
import { core } from "../lib/core.ts"
import { metricAtMost } from "../lib/targets.ts"
import type { Approach, Sample, Scenario } from "../types.ts"

interface Params {
  readonly runs: number
  readonly agents: number
  readonly concurrency: number
}

const perRun = (p: Params, ms: number): Sample => ({ ms, metrics: { usPerRun: (ms * 1000) / p.runs } })

const indices = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

const timedEffect = async (p: Params, body: Effect.Effect<unknown, unknown>, signal: AbortSignal): Promise<Sample> => {
  const start = performance.now()
  await Effect.runPromise(body, { signal })
  return perRun(p, performance.now() - start)
}

const forEach: Approach<Params> = {
  name: "Effect.forEach",
  run: (p, { signal }) =>
    timedEffect(
      p,
      Effect.gen(function* () {
        for (let run = 0; run < p.runs; run++) {
          yield* Effect.forEach(indices(p.agents), () => Effect.void, { concurrency: p.concurrency, discard: true })
        }
      }),
      signal
    )
}

const plimit: Approach<Params> = {
  name: "p-limit",
  run: async (p) => {
    const start = performance.now()
    for (let run = 0; run < p.runs; run++) {
      const limit = pLimit(p.concurrency)
      await Promise.all(indices(p.agents).map(() => limit(() => undefined)))
    }
    return perRun(p, performance.now() - start)
  }
}

const corral: Approach<Params> = {
  name: "corral",
  run: async (p, { signal }) => {
    const { Agent, Corral } = await core()
    return timedEffect(
      p,
      Effect.gen(function* () {
        for (let run = 0; run < p.runs; run++) {
          const agents = indices(p.agents).map((i) => Agent.make(`a${i}`, { run: Effect.void }))
          const result = yield* Corral.run(agents, { concurrency: p.concurrency })
          if (!result.allSucceeded) return yield* Effect.fail(new Error(`run ${run}: not every agent succeeded`))
        }
      }),
      signal
    )
  }
}

export const perRunScenario: Scenario<Params> = {
  name: "per-run",
  description:
    "The fixed cost of one run: 2,000 sequential runs of 10 no-op agents, each run started from inside an " +
    "Effect (what a nested run — a batch of tool calls per agent step — pays every time). Agent.make is timed.",
  floor: "Effect.forEach doing the same 2,000 batches of 10 in the same repetition; ratio = median / Effect.forEach",
  targets: [metricAtMost("corral ≤ 15 µs per run (steady state)", /runs/, "corral", "usPerRun", 15, fixed(1, " µs"))],
  warmup: true,
  steadyState: true,
  floorApproach: "Effect.forEach",
  columns: [
    { key: "usPerRun", label: "µs/run", format: fixed(2) },
    { key: "afterGcMs", label: "after GC", format: fixed(1, " ms") }
  ],
  approaches: [forEach, plimit, corral],
  cases: () => [
    { label: "2,000 runs × 10 no-op agents, concurrency 10", params: { runs: 2000, agents: 10, concurrency: 10 } }
  ]
}
