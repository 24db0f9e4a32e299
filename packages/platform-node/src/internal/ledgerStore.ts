import * as Effect from "effect/Effect"
import type * as SqlError from "effect/sql/SqlError"
import type { AgentRow, Batch, RunRow, RunUpdate, SuccessRow, TransitionRow } from "./ledgerModel.ts"

export interface RunSummaryRow extends RunRow {
  readonly total: number
  readonly done: number
  readonly succeeded: number
  readonly failed: number
}

/**
 * A store in the ledger's own memory that takes each event's rows as they come, without a batch.
 * Its agent rows are the ledger's: the ledger updates a row it has put in `agents` in place.
 */
export interface LiveStore {
  /** The store's table of a run's agents (created if missing). */
  readonly agents: (runId: string) => Map<string, AgentRow>
  /** The store's list of a run's transitions (created if missing). */
  readonly transitions: (runId: string) => Array<TransitionRow>
  readonly success: (row: SuccessRow) => void
  readonly updateRun: (update: RunUpdate) => void
}

/** Where the ledger's rows live. `apply` writes a whole batch atomically. */
export interface LedgerStore {
  /** Whether `apply` commits on another thread, so the writer need not wait for it to buffer more. */
  readonly concurrent: boolean
  /** Set when events may write straight into the store (every write is then committed at once). */
  readonly live?: LiveStore | undefined
  readonly apply: (batch: Batch) => Effect.Effect<void, SqlError.SqlError>
  readonly runs: Effect.Effect<ReadonlyArray<RunSummaryRow>, SqlError.SqlError>
  readonly run: (runId: string) => Effect.Effect<RunRow | undefined, SqlError.SqlError>
  readonly agents: (runId: string) => Effect.Effect<ReadonlyArray<AgentRow>, SqlError.SqlError>
  readonly transitions: (runId: string) => Effect.Effect<ReadonlyArray<TransitionRow>, SqlError.SqlError>
  readonly success: (key: string) => Effect.Effect<SuccessRow | undefined, SqlError.SqlError>
  /** Deletes the successes `runId` recorded; returns how many. */
  readonly forgetSuccesses: (runId: string) => Effect.Effect<number, SqlError.SqlError>
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
  const agentsOf = (runId: string): Map<string, AgentRow> => {
    let table = agents.get(runId)
    if (table === undefined) agents.set(runId, (table = new Map()))
    return table
  }
  const transitionsOf = (runId: string): Array<TransitionRow> => {
    let list = transitions.get(runId)
    if (list === undefined) transitions.set(runId, (list = []))
    return list
  }
  const putSuccess = (row: SuccessRow): void => {
    const previous = successes.get(row.idempotencyKey)
    if (previous === undefined || previous.recordedAt <= row.recordedAt) successes.set(row.idempotencyKey, row)
  }
  const updateRun = (update: RunUpdate): void => {
    const run = runs.get(update.runId)
    if (run !== undefined) runs.set(run.runId, updated(run, update))
  }
  const forgetSuccesses = (runId: string): number => {
    let removed = 0
    for (const [key, row] of successes) if (row.runId === runId && successes.delete(key)) removed++
    return removed
  }
  const apply = (batch: Batch): void => {
    for (const run of batch.runs) runs.set(run.runId, run)
    for (const update of batch.runUpdates.values()) updateRun(update)
    for (const row of batch.agents.values()) agentsOf(row.runId).set(row.agentId, row)
    for (const row of batch.transitions) transitionsOf(row.runId).push(row)
    for (const row of batch.successes.values()) putSuccess(row)
  }
  return {
    concurrent: false,
    live: { agents: agentsOf, transitions: transitionsOf, success: putSuccess, updateRun },
    apply: (batch) => Effect.sync(() => apply(batch)),
    runs: Effect.sync(() =>
      [...runs.values()].sort(newestFirst).map((run) => summarize(run, agents.get(run.runId)?.values() ?? []))
    ),
    run: (runId) => Effect.sync(() => runs.get(runId)),
    agents: (runId) => Effect.sync(() => [...(agents.get(runId)?.values() ?? [])]),
    transitions: (runId) => Effect.sync(() => [...(transitions.get(runId) ?? [])]),
    success: (key) => Effect.sync(() => successes.get(key)),
    forgetSuccesses: (runId) => Effect.sync(() => forgetSuccesses(runId)),
    running: Effect.sync(() => [...runs.values()].filter((run) => run.status === "running"))
  }
}
