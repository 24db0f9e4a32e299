import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Agent, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"

export interface LedgerMeasurement {
  readonly ledger: "none" | "memory" | "sqlite"
  readonly agents: number
  readonly medianMs: number
  readonly ratioToMemory: number
  readonly transactionsPerRun: number
  readonly statementsPerAgent: number
  readonly rowsPerAgent: number
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const agentsOf = (n: number) => Array.from({ length: n }, (_, i) => Agent.make(`a${i}`, { run: Effect.void }))

const planned = (n: number) => Array.from({ length: n }, (_, i) => ({ agentId: `a${i}`, dependsOn: [], idempotencyKey: `k${i}` }))

const oneRun = (n: number, rep: number, ledger: RunLedger.Service | undefined) =>
  Effect.gen(function* () {
    const runId = `bench-${rep}`
    const started = performance.now()
    if (ledger !== undefined) {
      yield* ledger.startRun({
        runId,
        planFile: "bench.yaml",
        planHash: "bench",
        options: {},
        pid: process.pid,
        hostname: os.hostname(),
        startedAt: Date.now(),
        agents: planned(n)
      })
    }
    yield* Corral.run(agentsOf(n), {
      runId,
      concurrency: 8,
      onEvent: ledger === undefined ? undefined : (event) => ledger.record(runId, event)
    })
    if (ledger !== undefined) yield* ledger.finishRun(runId, "succeeded", Date.now())
    return performance.now() - started
  })

const measure = (n: number, reps: number, layer: Layer.Layer<RunLedger.RunLedger, RunLedger.RunLedgerError> | undefined) =>
  Effect.gen(function* () {
    const ledger = layer === undefined ? undefined : yield* RunLedger.RunLedger
    yield* oneRun(n, -1, ledger)
    const before = ledger === undefined ? undefined : yield* ledger.stats
    const times: Array<number> = []
    for (let rep = 0; rep < reps; rep++) times.push(yield* oneRun(n, rep, ledger))
    const after = ledger === undefined ? undefined : yield* ledger.stats
    const delta = (key: "transactions" | "statements" | "rows") =>
      before === undefined || after === undefined ? 0 : (after[key] - before[key]) / reps
    return { ms: median(times), transactions: delta("transactions"), statements: delta("statements"), rows: delta("rows") }
  }).pipe(layer === undefined ? (e) => e : Effect.provide(layer)) as Effect.Effect<
    { ms: number; transactions: number; statements: number; rows: number },
    RunLedger.RunLedgerError
  >

/**
 * Wall time of a run of no-op agents with no ledger, the in-memory ledger and the SQLite ledger
 * (recording every event), and what the SQLite ledger wrote per agent.
 *
 * @example
 * ```ts
 * console.table(await measureLedger({ agents: 1000 }))
 * ```
 */
export async function measureLedger(
  options: { readonly agents?: number; readonly reps?: number; readonly quick?: boolean } = {}
): Promise<Array<LedgerMeasurement>> {
  const n = options.agents ?? 1000
  const reps = options.reps ?? (options.quick ? 3 : 7)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-ledger-bench-"))
  try {
    const none = await Effect.runPromise(measure(n, reps, undefined))
    const memory = await Effect.runPromise(measure(n, reps, RunLedger.layerMemory))
    const sqlite = await Effect.runPromise(measure(n, reps, RunLedger.layerSqlite(path.join(dir, "ledger.db"))))
    const row = (ledger: LedgerMeasurement["ledger"], m: typeof none): LedgerMeasurement => ({
      ledger,
      agents: n,
      medianMs: Math.round(m.ms * 10) / 10,
      ratioToMemory: Math.round((m.ms / memory.ms) * 100) / 100,
      transactionsPerRun: m.transactions,
      statementsPerAgent: Math.round((m.statements / n) * 1000) / 1000,
      rowsPerAgent: Math.round((m.rows / n) * 100) / 100
    })
    return [row("none", none), row("memory", memory), row("sqlite", sqlite)]
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
