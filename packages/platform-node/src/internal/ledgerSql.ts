import * as Effect from "effect/Effect"
import * as Str from "effect/String"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import type { AgentRow, Batch, RunRow, SuccessRow, TransitionRow } from "./ledgerModel.ts"
import type { LedgerStore, RunSummaryRow } from "./ledgerStore.ts"

const states = "'pending', 'queued', 'waiting', 'running', 'done'"

const createRuns = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, plan_file TEXT NOT NULL, plan_hash TEXT NOT NULL, options_json TEXT NOT NULL,
    status TEXT NOT NULL, pid INTEGER NOT NULL, hostname TEXT NOT NULL,
    started_at BIGINT NOT NULL, ended_at BIGINT, heartbeat_at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX runs_plan_hash ON runs (plan_hash, started_at)`
  yield* sql`CREATE INDEX runs_status ON runs (status)`
})

const withoutRowid = (sql: SqlClient.SqlClient): string =>
  sql.onDialectOrElse({ sqlite: () => " WITHOUT ROWID", orElse: () => "" })

/** An exact-enough float: SQLite's REAL is 8 bytes, Postgres's is 4 (0.01 reads back as 0.0099999997). */
const double = (sql: SqlClient.SqlClient): string =>
  sql.onDialectOrElse({ pg: () => "DOUBLE PRECISION", orElse: () => "REAL" })

const createAgents = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE agents (
    run_id TEXT NOT NULL, agent_id TEXT NOT NULL, position INTEGER NOT NULL,
    depends_on TEXT NOT NULL, idempotency_key TEXT,
    state TEXT NOT NULL CHECK (state IN (${sql.literal(states)})),
    attempts INTEGER NOT NULL, outcome TEXT, detail TEXT NOT NULL,
    queued_at BIGINT, started_at BIGINT, ended_at BIGINT, cost_usd ${sql.literal(double(sql))} NOT NULL, tokens BIGINT NOT NULL,
    branch TEXT, merge TEXT, log_path TEXT, value_json TEXT,
    PRIMARY KEY (run_id, agent_id),
    CHECK ((state = 'done') = (outcome IS NOT NULL)))${sql.literal(withoutRowid(sql))}`
})

const createTransitions = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({ pg: () => "BIGSERIAL PRIMARY KEY", orElse: () => "INTEGER PRIMARY KEY" })
  yield* sql`CREATE TABLE transitions (
    id ${sql.literal(id)}, run_id TEXT NOT NULL, agent_id TEXT,
    at BIGINT NOT NULL, tag TEXT NOT NULL, note TEXT, data TEXT)`
  yield* sql`CREATE INDEX transitions_run ON transitions (run_id, id)`
})

/**
 * Transitions since migration 5: one row per run and flush, its transitions as a JSON array, instead
 * of one row per transition (rows in `transitions` from before are still read, first).
 */
const createTransitionBatches = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({ pg: () => "BIGSERIAL PRIMARY KEY", orElse: () => "INTEGER PRIMARY KEY" })
  yield* sql`CREATE TABLE transition_batches (id ${sql.literal(id)}, run_id TEXT NOT NULL, entries TEXT NOT NULL)`
  yield* sql`CREATE INDEX transition_batches_run ON transition_batches (run_id, id)`
})

const createSuccesses = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE successes (
    idempotency_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    value_json TEXT NOT NULL, recorded_at BIGINT NOT NULL)${sql.literal(withoutRowid(sql))}`
})

/** Successes recorded by runs discarded before `corral discard` deleted them (their work is gone). */
const forgetDiscardedSuccesses = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DELETE FROM successes WHERE run_id IN (SELECT run_id FROM runs WHERE status = 'discarded')`
})

/** The ledger's versioned schema, tracked in its own migrations table. */
export const migrate = Migrator.make({})({
  table: "corral_ledger_migrations",
  loader: Migrator.fromRecord({
    "1_create_runs": createRuns,
    "2_create_agents": createAgents,
    "3_create_transitions": createTransitions,
    "4_create_successes": createSuccesses,
    "5_create_transition_batches": createTransitionBatches,
    "6_forget_discarded_successes": forgetDiscardedSuccesses
  })
})

const camel = (row: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(row).map(([key, value]) => [Str.snakeToCamel(key), value]))

const numeric = new Set([
  "pid",
  "startedAt",
  "endedAt",
  "heartbeatAt",
  "position",
  "attempts",
  "queuedAt",
  "costUsd",
  "tokens",
  "at",
  "recordedAt",
  "total",
  "done",
  "succeeded",
  "failed"
])

const decode = <A>(row: Record<string, unknown>): A => {
  const out = camel(row)
  for (const key of Object.keys(out)) {
    if (numeric.has(key) && out[key] !== null && out[key] !== undefined) out[key] = Number(out[key])
  }
  return out as A
}

const agentUpdated = [
  "state",
  "attempts",
  "outcome",
  "detail",
  "queued_at",
  "started_at",
  "ended_at",
  "cost_usd",
  "tokens",
  "branch",
  "merge",
  "log_path",
  "value_json"
]

/** How rows of one table become the parameters of a multi-row `INSERT`. */
interface Table<A> {
  readonly name: string
  /** The columns a row binds. */
  readonly columns: ReadonlyArray<string>
  /** SQLite: other columns and the constant each gets, e.g. `["state", "'pending'"]`. */
  readonly constants?: ReadonlyArray<readonly [string, string]> | undefined
  /** What follows the rows, e.g. an upsert clause. */
  readonly conflict: string
  /** On SQLite, `INSERT OR REPLACE` instead of `conflict`: cheaper, for tables whose rows are always written whole. */
  readonly replace: boolean
  /** Most rows in one statement (a power of two). */
  readonly max: number
  readonly params: (row: A, out: Array<unknown>) => void
}

const runsTable: Table<RunRow> = {
  name: "runs",
  columns: [
    "run_id",
    "plan_file",
    "plan_hash",
    "options_json",
    "status",
    "pid",
    "hostname",
    "started_at",
    "ended_at",
    "heartbeat_at"
  ],
  conflict: "",
  replace: false,
  max: 64,
  params: (row, out) => {
    out.push(
      row.runId,
      row.planFile,
      row.planHash,
      row.optionsJson,
      row.status,
      row.pid,
      row.hostname,
      row.startedAt,
      row.endedAt,
      row.heartbeatAt
    )
  }
}

const agentsTable: Table<AgentRow> = {
  name: "agents",
  columns: ["run_id", "agent_id", "position", "depends_on", "idempotency_key", ...agentUpdated],
  conflict: `ON CONFLICT (run_id, agent_id) DO UPDATE SET ${agentUpdated.map((c) => `${c} = excluded.${c}`).join(", ")}`,
  replace: true,
  max: 512,
  params: (row, out) => {
    out.push(
      row.runId,
      row.agentId,
      row.position,
      row.dependsOn,
      row.idempotencyKey,
      row.state,
      row.attempts,
      row.outcome,
      row.detail,
      row.queuedAt,
      row.startedAt,
      row.endedAt,
      row.costUsd,
      row.tokens,
      row.branch,
      row.merge,
      row.logPath,
      row.valueJson
    )
  }
}

/** The values of a row as `newAgentRow` makes it, but for its keys. */
const pendingConstants: ReadonlyArray<readonly [string, string]> = [
  ["state", "'pending'"],
  ["attempts", "0"],
  ["outcome", "NULL"],
  ["detail", "''"],
  ["queued_at", "NULL"],
  ["started_at", "NULL"],
  ["ended_at", "NULL"],
  ["cost_usd", "0"],
  ["tokens", "0"],
  ["branch", "NULL"],
  ["merge", "NULL"],
  ["log_path", "NULL"],
  ["value_json", "NULL"]
]

const isPending = (row: AgentRow): boolean =>
  row.state === "pending" &&
  row.attempts === 0 &&
  row.outcome === null &&
  row.detail === "" &&
  row.queuedAt === null &&
  row.startedAt === null &&
  row.endedAt === null &&
  row.costUsd === 0 &&
  row.tokens === 0 &&
  row.branch === null &&
  row.merge === null &&
  row.logPath === null &&
  row.valueJson === null

/** SQLite: agents as a run starts them (most of a run's rows), binding only what differs. */
const pendingAgentsTable: Table<AgentRow> = {
  name: "agents",
  columns: ["run_id", "agent_id", "position", "depends_on", "idempotency_key"],
  constants: pendingConstants,
  conflict: "",
  replace: true,
  max: 1024,
  params: (row, out) => {
    out.push(row.runId, row.agentId, row.position, row.dependsOn, row.idempotencyKey)
  }
}

/** The transitions one flush recorded for one run, as a JSON array of {@link Entry}. */
interface TransitionBatchRow {
  readonly runId: string
  readonly entries: string
}

/** A transition without its run: `[agentId, at, tag, note, data]`, without trailing nulls. */
type Entry =
  | readonly [string | null, number, string]
  | readonly [string | null, number, string, string | null]
  | readonly [string | null, number, string, string | null, string]

const entryOf = (row: TransitionRow): Entry =>
  row.data !== null
    ? [row.agentId, row.at, row.tag, row.note, row.data]
    : row.note !== null
      ? [row.agentId, row.at, row.tag, row.note]
      : [row.agentId, row.at, row.tag]

const transitionBatchesTable: Table<TransitionBatchRow> = {
  name: "transition_batches",
  columns: ["run_id", "entries"],
  conflict: "",
  replace: false,
  max: 1,
  params: (row, out) => {
    out.push(row.runId, row.entries)
  }
}

const successesTable: Table<SuccessRow> = {
  name: "successes",
  columns: ["idempotency_key", "run_id", "agent_id", "value_json", "recorded_at"],
  conflict: `ON CONFLICT (idempotency_key) DO UPDATE SET run_id = excluded.run_id,
  agent_id = excluded.agent_id, value_json = excluded.value_json, recorded_at = excluded.recorded_at
  WHERE excluded.recorded_at >= successes.recorded_at`,
  replace: false,
  max: 512,
  params: (row, out) => {
    out.push(row.idempotencyKey, row.runId, row.agentId, row.valueJson, row.recordedAt)
  }
}

/** One row per run: the batch's transitions of that run, in order. */
const transitionBatches = (transitions: ReadonlyArray<TransitionRow>): Array<TransitionBatchRow> => {
  const byRun = new Map<string, Array<Entry>>()
  for (const row of transitions) {
    const entry = entryOf(row)
    const entries = byRun.get(row.runId)
    if (entries === undefined) byRun.set(row.runId, [entry])
    else entries.push(entry)
  }
  const out: Array<TransitionBatchRow> = []
  for (const [runId, entries] of byRun) out.push({ runId, entries: JSON.stringify(entries) })
  return out
}

const decodeEntries = (runId: string, entries: string): Array<TransitionRow> =>
  (JSON.parse(entries) as ReadonlyArray<Entry>).map(([agentId, at, tag, note = null, data = null]) => ({
    runId,
    agentId,
    at,
    tag,
    note,
    data
  }))

type Rows = readonly [Record<string, unknown>, ...Array<Record<string, unknown>>]

/** The smallest power of two that is at least `n`, at most `max`. */
const chunkSize = (n: number, max: number): number => {
  let size = 1
  while (size < n && size < max) size *= 2
  return size
}

/** Counts what a store wrote: rows and statements, for overhead reports. */
export interface WriteStats {
  transactions: number
  statements: number
  rows: number
}

/** SQL text, its parameters, and how many it takes: the missing ones (padding rows) are null. */
export type Planned = readonly [sql: string, params: ReadonlyArray<unknown>, arity: number]

/** The parameters of a planned statement with its padding. */
export const padded = ([, params, arity]: Planned): ReadonlyArray<unknown> => {
  if (params.length >= arity) return params
  const out = params.slice()
  for (let i = params.length; i < arity; i++) out.push(null)
  return out
}

/** Runs the statements of one batch in one transaction, e.g. on a worker's connection. */
export type Executor = (statements: ReadonlyArray<Planned>) => Effect.Effect<void, SqlError.SqlError>

const sqliteTexts = new Map<string, string>()

/**
 * SQLite: `INSERT INTO table (...) SELECT ... FROM (VALUES (?, ...) x size) WHERE column1 IS NOT NULL`,
 * built once per table and size (a power of two), so a statement cache prepares each shape once. A
 * chunk is padded with rows of nulls to its size; the first column is never null.
 */
const sqliteText = (table: Table<any>, size: number): string => {
  const constants = table.constants ?? []
  const key = `${table.name}:${constants.length}:${size}`
  let text = sqliteTexts.get(key)
  if (text === undefined) {
    const tuple = `(${table.columns.map(() => "?").join(", ")})`
    const values = Array.from({ length: size }, () => tuple).join(", ")
    const insert = table.replace ? "INSERT OR REPLACE" : "INSERT"
    const conflict = table.replace ? "" : table.conflict
    const into = [...table.columns, ...constants.map(([column]) => column)].join(", ")
    const select = [...table.columns.map((_, i) => `column${i + 1}`), ...constants.map(([, value]) => value)]
    text = `${insert} INTO ${table.name} (${into})
      SELECT ${select.join(", ")} FROM (VALUES ${values}) WHERE column1 IS NOT NULL ${conflict}`
    sqliteTexts.set(key, text)
  }
  return text
}

// Rows in key order reach the B-tree in order (a little cheaper than in the order agents finish).
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)
const byAgentKey = (a: AgentRow, b: AgentRow): number => compare(a.runId, b.runId) || compare(a.agentId, b.agentId)
const bySuccessKey = (a: SuccessRow, b: SuccessRow): number => compare(a.idempotencyKey, b.idempotencyKey)

const runUpdateText = `UPDATE runs SET status = COALESCE(?, status), ended_at = COALESCE(?, ended_at),
  heartbeat_at = COALESCE(?, heartbeat_at) WHERE run_id = ?`

/** SQLite: the statements that write a batch, in order. */
const planSqlite = (batch: Batch, stats: WriteStats): Array<Planned> => {
  const out: Array<Planned> = []
  const write = <A>(table: Table<A>, rows: ReadonlyArray<A>): void => {
    for (let from = 0; from < rows.length; from += table.max) {
      const count = Math.min(table.max, rows.length - from)
      const size = chunkSize(count, table.max)
      const params: Array<unknown> = []
      for (let i = from; i < from + count; i++) table.params(rows[i]!, params)
      out.push([sqliteText(table, size), params, size * table.columns.length])
    }
    stats.rows += rows.length
  }
  write(runsTable, batch.runs)
  for (const update of batch.runUpdates.values()) {
    out.push([
      runUpdateText,
      [update.status ?? null, update.endedAt ?? null, update.heartbeatAt ?? null, update.runId],
      4
    ])
    stats.rows++
  }
  const pending: Array<AgentRow> = []
  const changed: Array<AgentRow> = []
  for (const row of batch.agents.values()) (isPending(row) ? pending : changed).push(row)
  write(pendingAgentsTable, pending.sort(byAgentKey))
  write(agentsTable, changed.sort(byAgentKey))
  write(transitionBatchesTable, transitionBatches(batch.transitions))
  write(successesTable, [...batch.successes.values()].sort(bySuccessKey))
  stats.statements += out.length
  return out
}

/**
 * A store over `sql`. On SQLite, a batch's writes are planned as a few multi-row statements of
 * fixed shapes and run by `executor` when given (else on `sql`, in one transaction).
 */
export const makeSqlStore = (sql: SqlClient.SqlClient, stats: WriteStats, executor?: Executor): LedgerStore => {
  const isSqlite = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })

  const statement = <A>(table: Table<A>, rows: ReadonlyArray<A>) => {
    const params: Array<unknown> = []
    for (const row of rows) table.params(row, params)
    const width = table.columns.length
    const records = rows.map((_, i) => {
      const record: Record<string, unknown> = {}
      table.columns.forEach((column, j) => {
        record[column] = params[i * width + j]
      })
      return record
    })
    return sql`INSERT INTO ${sql(table.name)} ${sql.insert(records as unknown as Rows)} ${sql.literal(table.conflict)}`
  }

  const write = <A>(table: Table<A>, rows: ReadonlyArray<A>): Effect.Effect<void, SqlError.SqlError> =>
    Effect.suspend(() => {
      const statements: Array<Effect.Effect<unknown, SqlError.SqlError>> = []
      for (let from = 0; from < rows.length; from += table.max) {
        statements.push(statement(table, rows.slice(from, from + table.max)))
      }
      stats.statements += statements.length
      stats.rows += rows.length
      return Effect.all(statements, { discard: true })
    })

  const applyUpdates = (batch: Batch) =>
    Effect.forEach(
      batch.runUpdates.values(),
      (update) =>
        Effect.tap(
          sql`UPDATE runs SET status = COALESCE(${update.status ?? null}, status),
        ended_at = COALESCE(${update.endedAt ?? null}, ended_at),
        heartbeat_at = COALESCE(${update.heartbeatAt ?? null}, heartbeat_at)
        WHERE run_id = ${update.runId}`,
          Effect.sync(() => {
            stats.statements++
            stats.rows++
          })
        ),
      { discard: true }
    )

  const applyGeneric = (batch: Batch) =>
    sql.withTransaction(
      Effect.all(
        [
          write(runsTable, batch.runs),
          applyUpdates(batch),
          write(agentsTable, [...batch.agents.values()]),
          write(transitionBatchesTable, transitionBatches(batch.transitions)),
          write(successesTable, [...batch.successes.values()])
        ],
        { discard: true }
      )
    )

  const applySqlite = (batch: Batch) =>
    Effect.suspend(() => {
      const planned = planSqlite(batch, stats)
      if (executor !== undefined) return executor(planned)
      return sql.withTransaction(
        Effect.forEach(planned, (statement) => sql.unsafe(statement[0], padded(statement)), { discard: true })
      )
    })

  const apply = (batch: Batch) =>
    (isSqlite ? applySqlite(batch) : applyGeneric(batch)).pipe(Effect.tap(Effect.sync(() => stats.transactions++)))

  const one = <A>(rows: ReadonlyArray<Record<string, unknown>>): A | undefined =>
    rows[0] === undefined ? undefined : decode<A>(rows[0])

  return {
    concurrent: executor !== undefined,
    apply,
    runs: Effect.map(
      sql<Record<string, unknown>>`SELECT r.*, COUNT(a.agent_id) AS total,
        COALESCE(SUM(CASE WHEN a.state = 'done' THEN 1 ELSE 0 END), 0) AS done,
        COALESCE(SUM(CASE WHEN a.outcome IN ('Succeeded', 'Cached') THEN 1 ELSE 0 END), 0) AS succeeded,
        COALESCE(SUM(CASE WHEN a.outcome IN ('Failed', 'TimedOut', 'ClaimTimedOut') THEN 1 ELSE 0 END), 0) AS failed
        FROM runs r LEFT JOIN agents a ON a.run_id = r.run_id
        GROUP BY r.run_id ORDER BY r.started_at DESC, r.run_id DESC`,
      (rows) => rows.map((row) => decode<RunSummaryRow>(row))
    ),
    run: (runId) => Effect.map(sql<Record<string, unknown>>`SELECT * FROM runs WHERE run_id = ${runId}`, one<RunRow>),
    agents: (runId) =>
      Effect.map(sql<Record<string, unknown>>`SELECT * FROM agents WHERE run_id = ${runId}`, (rows) =>
        rows.map((row) => decode<AgentRow>(row))
      ),
    transitions: (runId) =>
      Effect.map(
        Effect.all([
          sql<Record<string, unknown>>`SELECT run_id, agent_id, at, tag, note, data FROM transitions
            WHERE run_id = ${runId} ORDER BY id`,
          sql<{ readonly entries: string }>`SELECT entries FROM transition_batches WHERE run_id = ${runId} ORDER BY id`
        ]),
        ([legacy, batches]) => [
          ...legacy.map((row) => decode<TransitionRow>(row)),
          ...batches.flatMap((row) => decodeEntries(runId, row.entries))
        ]
      ),
    success: (key) =>
      Effect.map(sql<Record<string, unknown>>`SELECT * FROM successes WHERE idempotency_key = ${key}`, one<SuccessRow>),
    forgetSuccesses: (runId) =>
      Effect.map(
        sql<{ readonly removed: number }>`DELETE FROM successes WHERE run_id = ${runId} RETURNING 1 AS removed`,
        (rows) => rows.length
      ),
    running: Effect.map(sql<Record<string, unknown>>`SELECT * FROM runs WHERE status = 'running'`, (rows) =>
      rows.map((row) => decode<RunRow>(row))
    )
  }
}
