import * as Effect from "effect/Effect"
import type * as SqlError from "effect/sql/SqlError"
import type { AgentRow, Batch, RunRow, RunUpdate, SuccessRow, TransitionRow } from "./ledgerModel.ts"

export interface RunSummaryRow extends RunRow {
  readonly total: number
  readonly done: number
  readonly succeeded: number
  readonly failed: number
}

/** Where the ledger's rows live. `apply` writes a whole batch atomically. */
export interface LedgerStore {
  /** Whether `apply` commits on another thread, so the writer need not wait for it to buffer more. */
  readonly concurrent: boolean
  readonly apply: (batch: Batch) => Effect.Effect<void, SqlError.SqlError>
  readonly runs: Effect.Effect<ReadonlyArray<RunSummaryRow>, SqlError.SqlError>
  readonly run: (runId: string) => Effect.Effect<RunRow | undefined, SqlError.SqlError>
  readonly agents: (runId: string) => Effect.Effect<ReadonlyArray<AgentRow>, SqlError.SqlError>
  readonly transitions: (runId: string) => Effect.Effect<ReadonlyArray<TransitionRow>, SqlError.SqlError>
  readonly success: (key: string) => Effect.Effect<SuccessRow | undefined, SqlError.SqlError>
  readonly running: Effect.Effect<ReadonlyArray<RunRow>, SqlError.SqlError>
}

const succeededOutcomes = new Set(["Succeeded", "Cached"])
const failedOutcomes = new Set(["Failed", "TimedOut", "ClaimTimedOut"])

export const summarize = (run: RunRow, agents: Iterable<AgentRow>): RunSummaryRow => {
  let total = 0
  let done = 0
  let succeeded = 0
  let failed = 0
  for (const agent of agents) {
    total++
    if (agent.state === "done") done++
    if (agent.outcome !== null && succeededOutcomes.has(agent.outcome)) succeeded++
    if (agent.outcome !== null && failedOutcomes.has(agent.outcome)) failed++
  }
  return { ...run, total, done, succeeded, failed }
}

export const newestFirst = (a: RunRow, b: RunRow): number => b.startedAt - a.startedAt || (a.runId < b.runId ? 1 : -1)

const updated = (run: RunRow, update: RunUpdate): RunRow => ({
  ...run,
  status: update.status ?? run.status,
  endedAt: update.endedAt ?? run.endedAt,
  heartbeatAt: update.heartbeatAt ?? run.heartbeatAt
})

/** Rows in maps; every call is one synchronous step, so a batch is applied atomically. */
export const makeMemoryStore = (): LedgerStore => {
  const runs = new Map<string, RunRow>()
  const agents = new Map<string, Map<string, AgentRow>>()
  const transitions = new Map<string, Array<TransitionRow>>()
  const successes = new Map<string, SuccessRow>()
  const apply = (batch: Batch): void => {
    for (const run of batch.runs) runs.set(run.runId, run)
    for (const update of batch.runUpdates.values()) {
      const run = runs.get(update.runId)
      if (run !== undefined) runs.set(run.runId, updated(run, update))
    }
    for (const row of batch.agents.values()) {
      let table = agents.get(row.runId)
      if (table === undefined) agents.set(row.runId, (table = new Map()))
      table.set(row.agentId, row)
    }
    for (const row of batch.transitions) {
      const list = transitions.get(row.runId)
      if (list === undefined) transitions.set(row.runId, [row])
      else list.push(row)
    }
    for (const row of batch.successes.values()) {
      const previous = successes.get(row.idempotencyKey)
      if (previous === undefined || previous.recordedAt <= row.recordedAt) successes.set(row.idempotencyKey, row)
    }
  }
  return {
    concurrent: false,
    apply: (batch) => Effect.sync(() => apply(batch)),
    runs: Effect.sync(() =>
      [...runs.values()].sort(newestFirst).map((run) => summarize(run, agents.get(run.runId)?.values() ?? []))
    ),
    run: (runId) => Effect.sync(() => runs.get(runId)),
    agents: (runId) => Effect.sync(() => [...(agents.get(runId)?.values() ?? [])]),
    transitions: (runId) => Effect.sync(() => [...(transitions.get(runId) ?? [])]),
    success: (key) => Effect.sync(() => successes.get(key)),
    running: Effect.sync(() => [...runs.values()].filter((run) => run.status === "running"))
  }
}
