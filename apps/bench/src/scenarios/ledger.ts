import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Agent, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { fixed } from "../format.ts"
import { ratioAtMost } from "../lib/targets.ts"
import { median } from "../stats.ts"
import type { Approach, ApproachResult, CaseResult, Sample, Scenario, Target } from "../types.ts"

type Kind = "none" | "memory" | "sqlite"

interface Params {
  readonly agents: number
  readonly workMs: number
}

let runs = 0

/**
 * Agents per no-op run: enough that a run allocates more than the young generation holds, so its
 * own scavenges (which copy the rows a ledger keeps) fall inside it rather than in the untimed
 * collection before the next sample (a 1,000-agent run had none).
 */
const noOpAgents = 10_000

const planned = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ agentId: `a${i}`, dependsOn: [], idempotencyKey: `k${i}` }))

const agentsOf = (p: Params) =>
  Array.from({ length: p.agents }, (_, i) =>
    Agent.make(`a${i}`, { run: p.workMs === 0 ? Effect.void : Effect.sleep(p.workMs) })
  )

/** The record of a bench run of `agents` planned agents, started now. */
export const runStart = (runId: string, agents: number): RunLedger.RunStart => ({
  runId,
  planFile: "bench.yaml",
  planHash: "bench",
  options: {},
  pid: process.pid,
  hostname: os.hostname(),
  startedAt: Date.now(),
  agents: planned(agents)
})

/** One run of the agents with every event recorded in `ledger` (or none); only the run itself is timed. */
const oneRun = (p: Params, ledger: RunLedger.Service | undefined) =>
  Effect.gen(function* () {
    const runId = `bench-${runs++}`
    const before = ledger === undefined ? undefined : yield* ledger.stats
    const cpu = process.cpuUsage()
    const started = performance.now()
    if (ledger !== undefined) {
      yield* ledger.startRun(runStart(runId, p.agents))
    }
    const result = yield* Corral.run(agentsOf(p), {
      runId,
      concurrency: 8,
      onEvent: ledger === undefined ? undefined : (event) => ledger.record(runId, event)
    })
    if (ledger !== undefined) yield* ledger.finishRun(runId, "succeeded", Date.now())
    const ms = performance.now() - started
    const { user, system } = process.cpuUsage(cpu)
    if (!result.allSucceeded) return yield* Effect.fail(new Error("not every agent succeeded"))
    const after = ledger === undefined ? undefined : yield* ledger.stats
    const statements = before && after ? (after.statements - before.statements) / p.agents : 0
    const metrics = { usPerAgent: (ms * 1000) / p.agents, cpuUsPerAgent: (user + system) / p.agents }
    return { ms, metrics: { ...metrics, statementsPerAgent: statements } } as Sample
  })

const warmUp = (ledger: RunLedger.Service) =>
  Effect.suspend(() => {
    const runId = `bench-warm-up-${runs++}`
    return Effect.andThen(
      ledger.startRun(runStart(runId, 1)),
      Effect.suspend(() => ledger.finishRun(runId, "succeeded", Date.now()))
    )
  })

const layerOf = (kind: Exclude<Kind, "none">, dir: string) =>
  kind === "memory" ? RunLedger.layerMemory : RunLedger.layerSqlite(path.join(dir, "ledger.db"))

const approach = (kind: Kind): Approach<Params> => ({
  name: kind === "none" ? "no ledger" : `${kind} ledger`,
  run: async (p) => {
    if (kind === "none") return Effect.runPromise(oneRun(p, undefined))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-ledger-bench-"))
    try {
      return await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const ledger = Context.get(yield* Layer.build(layerOf(kind, dir)), RunLedger.RunLedger)
            // The SQLite ledger's writer thread starts beside whatever follows the layer's build (a
            // CLI run's set-up), and its first write waits for it: one untimed run record first, so
            // the timed run measures recording, not the thread's start.
            yield* warmUp(ledger)
            return yield* oneRun(p, ledger)
          })
        )
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

/** A's samples less B's of the same repetition (both ran in every one), µs per agent, sorted. */
const pairedUs = (a: ApproachResult, b: ApproachResult, agents: number): Array<number> =>
  a.samplesMs.length !== b.samplesMs.length
    ? []
    : a.samplesMs.map((ms, i) => ((ms - b.samplesMs[i]!) * 1000) / agents).sort((x, y) => x - y)

const quartile = (sorted: ReadonlyArray<number>, q: number): number => sorted[Math.round((sorted.length - 1) * q)]!

const noOpCase = (cases: ReadonlyArray<CaseResult>) => {
  const item = cases.find((c) => c.label.includes("no-op"))
  const none = item?.approaches.find((a) => a.name === "no ledger")
  const memory = item?.approaches.find((a) => a.name === "memory ledger")
  return none === undefined || memory === undefined ? undefined : { none, memory }
}

/**
 * The median over repetitions of the memory ledger's run less the no-ledger run of the same
 * repetition, with the quartiles of those differences. On a busy machine a 25 ms run waits for a
 * core several times over, so this measures the load as much as the ledger (three runs at load 8–10:
 * 2.4 / 16.7 / 6.5 µs); the CPU target beside it moved much less (2.1 / 2.6 / 2.3 µs).
 */
const memoryOverNone: Target = {
  label: "in-memory ledger ≤ 5 µs per agent over no ledger (no-op agents)",
  evaluate: (cases: ReadonlyArray<CaseResult>) => {
    const found = noOpCase(cases)
    const diffs = found === undefined ? [] : pairedUs(found.memory, found.none, noOpAgents)
    if (diffs.length === 0) return undefined
    const over = median(diffs)
    const spread = `quartiles ${quartile(diffs, 0.25).toFixed(1)}–${quartile(diffs, 0.75).toFixed(1)}`
    return { figure: `${over.toFixed(1)} µs per agent (${spread})`, met: over <= 5 }
  }
}

/** The same in CPU time: the ledger's median less no ledger's (every thread, the collector's helpers too). */
const memoryCpuOverNone: Target = {
  label: "in-memory ledger ≤ 5 µs of CPU per agent over no ledger (no-op agents)",
  evaluate: (cases: ReadonlyArray<CaseResult>) => {
    const found = noOpCase(cases)
    const memory = found?.memory.metrics.cpuUsPerAgent
    const none = found?.none.metrics.cpuUsPerAgent
    if (memory === undefined || none === undefined) return undefined
    return { figure: `${(memory - none).toFixed(1)} µs of CPU per agent`, met: memory - none <= 5 }
  }
}

const sqliteOverNone: Target = {
  label: "SQLite ledger cost per agent over no ledger (no-op agents; no target, reported)",
  evaluate: (cases: ReadonlyArray<CaseResult>) => {
    const item = cases.find((c) => c.label.includes("no-op"))
    const none = item?.approaches.find((a) => a.name === "no ledger")?.metrics.usPerAgent
    const sqlite = item?.approaches.find((a) => a.name === "sqlite ledger")?.metrics.usPerAgent
    if (none === undefined || sqlite === undefined) return undefined
    return { figure: `${(sqlite - none).toFixed(1)} µs per agent`, met: undefined }
  }
}

export const ledger: Scenario<Params> = {
  name: "ledger",
  description:
    "What the durable record costs: a run of 10,000 no-op agents (or 1,000 of 1 ms) at concurrency 8 " +
    "recording every event in no ledger, the in-memory ledger and the SQLite ledger (building the ledger and " +
    "one warm-up run record, which waits for the SQLite writer thread's start, are not timed). Steady state; " +
    "'after GC' is the median of the runs right after two full GCs; CPU is the process's (every thread) " +
    "over the timed run. The in-memory target is the median over repetitions of the ledger's run less the " +
    "no-ledger run of the same repetition (with those differences' quartiles), and the same in CPU time.",
  floor: "the same run with no ledger, in the same repetition; ratio = median / no ledger",
  targets: [
    ratioAtMost("SQLite ≤ 1.5× no ledger for agents of 1 ms", /1 ms/, "sqlite ledger", 1.5),
    memoryOverNone,
    memoryCpuOverNone,
    sqliteOverNone
  ],
  warmup: true,
  steadyState: true,
  floorApproach: "no ledger",
  columns: [
    { key: "usPerAgent", label: "µs/agent", format: fixed(1) },
    { key: "cpuUsPerAgent", label: "CPU µs/agent", format: fixed(1) },
    { key: "statementsPerAgent", label: "SQL statements/agent", format: fixed(2) },
    { key: "afterGcMs", label: "after GC", format: fixed(1, " ms") }
  ],
  approaches: [approach("none"), approach("memory"), approach("sqlite")],
  cases: ({ quick }) => [
    {
      label: "10,000 no-op agents (Effect.void), concurrency 8",
      params: { agents: noOpAgents, workMs: 0 },
      reps: 21
    },
    { label: `${quick ? 200 : 1000} agents of 1 ms, concurrency 8`, params: { agents: quick ? 200 : 1000, workMs: 1 } }
  ]
}
