import * as Effect from "effect/Effect"
import { fixed } from "../format.ts"
import { core, runAgents } from "../lib/core.ts"
import type { Approach, CaseResult, Sample, Scenario, Target } from "../types.ts"

interface Params {
  readonly n: number
  readonly concurrency: number
}

const indices = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

const perAgent = (p: Params, ms: number): Sample => ({ ms, metrics: { usPerAgent: (ms * 1000) / p.n } })

const withoutSubscriber: Approach<Params> = {
  name: "corral, no subscriber",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    const start = performance.now()
    await runAgents(
      indices(p.n).map((i) => Agent.make(`a${i}`, { run: Effect.void })),
      { concurrency: p.concurrency },
      signal
    )
    return perAgent(p, performance.now() - start)
  }
}

const counting: Approach<Params> = {
  name: "corral, onEvent that counts",
  run: async (p, { signal }) => {
    const { Agent } = await core()
    let events = 0
    const onEvent = () => {
      events++
      return Effect.void
    }
    const start = performance.now()
    await runAgents(
      indices(p.n).map((i) => Agent.make(`a${i}`, { run: Effect.void })),
      { concurrency: p.concurrency, onEvent },
      signal
    )
    const ms = performance.now() - start
    if (events < p.n) throw new Error(`the subscriber saw ${events} events for ${p.n} agents`)
    return { ms, metrics: { usPerAgent: (ms * 1000) / p.n, eventsPerAgent: events / p.n } }
  }
}

const addedCost: Target = {
  label: "a subscriber adds ≤ 1 µs per agent",
  evaluate: (cases: ReadonlyArray<CaseResult>) => {
    const item = cases[0]
    const base = item?.approaches.find((a) => a.name === withoutSubscriber.name)?.metrics.usPerAgent
    const subscribed = item?.approaches.find((a) => a.name === counting.name)?.metrics.usPerAgent
    if (base === undefined || subscribed === undefined) return undefined
    const added = subscribed - base
    return { figure: `${added.toFixed(2)} µs per agent`, met: added <= 1 }
  }
}

export const events: Scenario<Params> = {
  name: "events",
  description:
    "What observing a run costs: 100,000 Effect.void agents at concurrency 64, with no onEvent and with an " +
    "onEvent subscriber that only counts the events it sees.",
  floor: "the same run without a subscriber; ratio = median / no subscriber",
  targets: [addedCost],
  warmup: true,
  steadyState: true,
  floorApproach: withoutSubscriber.name,
  columns: [
    { key: "usPerAgent", label: "µs/agent", format: fixed(3) },
    { key: "eventsPerAgent", label: "events/agent", format: fixed(1) }
  ],
  approaches: [withoutSubscriber, counting],
  cases: ({ quick }) => {
    const n = quick ? 20_000 : 100_000
    return [{ label: `N = ${n.toLocaleString("en-US")}, concurrency 64`, params: { n, concurrency: 64 } }]
  }
}
