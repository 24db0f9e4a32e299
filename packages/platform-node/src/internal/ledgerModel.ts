import type * as RunRecord from "../RunRecord.ts"

export type AgentState = "pending" | "queued" | "waiting" | "running" | "done"

export const agentStates: ReadonlyArray<AgentState> = ["pending", "queued", "waiting", "running", "done"]

export interface RunRow {
  readonly runId: string
  readonly planFile: string
  readonly planHash: string
  readonly optionsJson: string
  readonly status: RunRecord.RunStatus
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly endedAt: number | null
  readonly heartbeatAt: number
}

export interface RunUpdate {
  readonly runId: string
  readonly status?: RunRecord.RunStatus | undefined
  readonly endedAt?: number | undefined
  readonly heartbeatAt?: number | undefined
}

export interface AgentRow {
  readonly runId: string
  readonly agentId: string
  readonly position: number
  readonly dependsOn: string
  readonly idempotencyKey: string | null
  readonly state: AgentState
  readonly attempts: number
  readonly outcome: string | null
  readonly detail: string
  readonly queuedAt: number | null
  readonly startedAt: number | null
  readonly endedAt: number | null
  readonly costUsd: number
  readonly tokens: number
  readonly branch: string | null
  readonly merge: string | null
  readonly logPath: string | null
  readonly valueJson: string | null
}

/** An agent row the ledger still owns (not yet handed to a store), updated in place. */
export type MutableAgentRow = { -readonly [K in keyof AgentRow]: AgentRow[K] }

/** A copy of a row, to update while the original stays as a store or batch saw it. */
export const copyAgentRow = (row: AgentRow): MutableAgentRow => ({
  runId: row.runId,
  agentId: row.agentId,
  position: row.position,
  dependsOn: row.dependsOn,
  idempotencyKey: row.idempotencyKey,
  state: row.state,
  attempts: row.attempts,
  outcome: row.outcome,
  detail: row.detail,
  queuedAt: row.queuedAt,
  startedAt: row.startedAt,
  endedAt: row.endedAt,
  costUsd: row.costUsd,
  tokens: row.tokens,
  branch: row.branch,
  merge: row.merge,
  logPath: row.logPath,
  valueJson: row.valueJson
})

export interface TransitionRow {
  readonly runId: string
  readonly agentId: string | null
  readonly at: number
  readonly tag: string
  readonly note: string | null
  readonly data: string | null
}

export interface SuccessRow {
  readonly idempotencyKey: string
  readonly runId: string
  readonly agentId: string
  readonly valueJson: string
  readonly recordedAt: number
}

export interface Batch {
  readonly runs: Array<RunRow>
  readonly runUpdates: Map<string, RunUpdate>
  readonly agents: Map<string, AgentRow>
  readonly transitions: Array<TransitionRow>
  readonly successes: Map<string, SuccessRow>
}

export const emptyBatch = (): Batch => ({
  runs: [],
  runUpdates: new Map(),
  agents: new Map(),
  transitions: [],
  successes: new Map()
})

export const batchSize = (batch: Batch): number =>
  batch.runs.length + batch.runUpdates.size + batch.agents.size + batch.transitions.length + batch.successes.size

export const agentKey = (runId: string, agentId: string): string => `${runId}\u0000${agentId}`

export const mergeRunUpdate = (batch: Batch, update: RunUpdate): void => {
  const previous = batch.runUpdates.get(update.runId)
  batch.runUpdates.set(update.runId, { ...previous, ...dropUndefined(update) })
}

const dropUndefined = <A extends object>(value: A): A =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as A

/** Puts `older` (a batch that failed to commit) in front of `newer`. */
export const prependBatch = (older: Batch, newer: Batch): Batch => {
  const merged = emptyBatch()
  merged.runs.push(...older.runs, ...newer.runs)
  for (const update of [...older.runUpdates.values(), ...newer.runUpdates.values()]) mergeRunUpdate(merged, update)
  for (const [key, row] of [...older.agents, ...newer.agents]) merged.agents.set(key, row)
  merged.transitions.push(...older.transitions, ...newer.transitions)
  for (const [key, row] of [...older.successes, ...newer.successes]) merged.successes.set(key, row)
  return merged
}

const isJsonData = (value: unknown, depth: number): boolean => {
  if (depth > 64) return false
  if (value === null || typeof value === "string" || typeof value === "boolean") return true
  if (typeof value === "number") return Number.isFinite(value)
  if (Array.isArray(value)) return value.every((item) => isJsonData(item, depth + 1))
  if (typeof value !== "object" || Object.getPrototypeOf(value) !== Object.prototype) return false
  return Object.values(value).every((item) => item === undefined || isJsonData(item, depth + 1))
}

/** `{"value":...}` when the value survives a JSON round trip unchanged (`undefined` included), else null. */
export const encodeValue = (value: unknown): string | null =>
  value === undefined ? "{}" : isJsonData(value, 0) ? JSON.stringify({ value }) : null

export const decodeValue = (json: string): unknown => (JSON.parse(json) as { readonly value?: unknown }).value

export const field = (event: object, name: string): unknown => (event as Record<string, unknown>)[name]
