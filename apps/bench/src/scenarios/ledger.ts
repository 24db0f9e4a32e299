import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Agent, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import * as Effect from "effect/Effect"
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"

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

const planned = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ agentId: `a${i}`, dependsOn: [], idempotencyKey: `k${i}` }))

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

interface Measured {
  readonly ms: number
  readonly transactions: number
  readonly statements: number
  readonly rows: number
}

type Name = LedgerMeasurement["ledger"]
type Stats = RunLedger.WriteStats

const names: ReadonlyArray<Name> = ["none", "memory", "sqlite"]

const build = (
  name: Name,
  dir: string
): Effect.Effect<RunLedger.Service | undefined, RunLedger.RunLedgerError, Scope.Scope> => {
  if (name === "none") return Effect.succeed(undefined)
  const layer = name === "memory" ? RunLedger.layerMemory : RunLedger.layerSqlite(path.join(dir, "ledger.db"))
  return Effect.map(Layer.build(layer), (context) => Context.get(context, RunLedger.RunLedger))
}

const statsOf = (ledger: RunLedger.Service | undefined): Effect.Effect<Stats> =>
  ledger === undefined ? Effect.succeed({ transactions: 0, statements: 0, rows: 0 }) : ledger.stats

const measureAll = (n: number, reps: number, dir: string): Effect.Effect<Map<Name, Measured>, unknown> =>
  Effect.scoped(
    Effect.gen(function* () {
      const ledgers = new Map<Name, RunLedger.Service | undefined>()
      for (const name of names) ledgers.set(name, yield* build(name, dir))
      const times = new Map<Name, Array<number>>(names.map((name) => [name, []]))
      const before = new Map<Name, Stats>()
      for (const name of names) {
        yield* oneRun(n, -1, ledgers.get(name))
        before.set(name, yield* statsOf(ledgers.get(name)))
      }
      for (let rep = 0; rep < reps; rep++) {
        for (const name of names) times.get(name)!.push(yield* oneRun(n, rep, ledgers.get(name)))
      }
      const out = new Map<Name, Measured>()
      for (const name of names) {
        const after = yield* statsOf(ledgers.get(name))
        const delta = (key: keyof Stats) => (after[key] - before.get(name)![key]) / reps
        out.set(name, {
          ms: median(times.get(name)!),
          transactions: delta("transactions"),
          statements: delta("statements"),
          rows: delta("rows")
        })
      }
      return out
    })
  )

/**
 * Wall time of a run of no-op agents with no ledger, the in-memory ledger and the SQLite ledger
 * (recording every event), and what the SQLite ledger wrote per agent.
 *
 * @example
 * ```ts
 * import { measureLedger } from "./ledger.ts"
 *
 * console.table(await measureLedger({ agents: 1000 }))
 * ```
 */
export async function measureLedger(
  options: { readonly agents?: number; readonly reps?: number; readonly quick?: boolean } = {}
): Promise<Array<LedgerMeasurement>> {
  const n = options.agents ?? 1000
  const reps = options.reps ?? (options.quick ? 5 : 15)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-ledger-bench-"))
  try {
    const results = await Effect.runPromise(measureAll(n, reps, dir))
    const memory = results.get("memory")!
    const row = (ledger: LedgerMeasurement["ledger"], m: Measured): LedgerMeasurement => ({
      ledger,
      agents: n,
      medianMs: Math.round(m.ms * 10) / 10,
      ratioToMemory: Math.round((m.ms / memory.ms) * 100) / 100,
      transactionsPerRun: m.transactions,
      statementsPerAgent: Math.round((m.statements / n) * 1000) / 1000,
      rowsPerAgent: Math.round((m.rows / n) * 100) / 100
    })
    return names.map((name) => row(name, results.get(name)!))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
