import { Effect, String as Str } from "effect"
import { Migrator, SqlClient, type SqlError } from "effect/sql"
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

const createAgents = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE agents (
    run_id TEXT NOT NULL, agent_id TEXT NOT NULL, position INTEGER NOT NULL,
    depends_on TEXT NOT NULL, idempotency_key TEXT,
    state TEXT NOT NULL CHECK (state IN (${sql.literal(states)})),
    attempts INTEGER NOT NULL, outcome TEXT, detail TEXT NOT NULL,
    queued_at BIGINT, started_at BIGINT, ended_at BIGINT, cost_usd REAL NOT NULL, tokens BIGINT NOT NULL,
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

const createSuccesses = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE successes (
    idempotency_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    value_json TEXT NOT NULL, recorded_at BIGINT NOT NULL)${sql.literal(withoutRowid(sql))}`
})

/** The ledger's versioned schema, tracked in its own migrations table. */
export const migrate = Migrator.make({})({
  table: "corral_ledger_migrations",
  loader: Migrator.fromRecord({
    "1_create_runs": createRuns,
    "2_create_agents": createAgents,
    "3_create_transitions": createTransitions,
    "4_create_successes": createSuccesses
  })
})

const snakeNames = new Map<string, string>()
const snakeName = (key: string): string => {
  let name = snakeNames.get(key)
  if (name === undefined) snakeNames.set(key, (name = Str.camelToSnake(key)))
  return name
}

const snake = (row: object): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key in row) out[snakeName(key)] = (row as Record<string, unknown>)[key]
  return out
}

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

const agentColumns = [
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
const agentUpsert = `ON CONFLICT (run_id, agent_id) DO UPDATE SET ${agentColumns.map((c) => `${c} = excluded.${c}`).join(", ")}`

const successUpsert = `ON CONFLICT (idempotency_key) DO UPDATE SET run_id = excluded.run_id,
  agent_id = excluded.agent_id, value_json = excluded.value_json, recorded_at = excluded.recorded_at
  WHERE excluded.recorded_at >= successes.recorded_at`

type Rows<A> = readonly [A, ...Array<A>]

const chunks = <A>(rows: ReadonlyArray<A>, size: number): Array<Rows<A>> => {
  const out: Array<Rows<A>> = []
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size) as unknown as Rows<A>)
  return out
}

const snakeRows = <A extends object>(rows: Rows<A>): Rows<Record<string, unknown>> =>
  rows.map(snake) as unknown as Rows<Record<string, unknown>>

/** Counts what a store wrote: rows and statements, for overhead reports. */
export interface WriteStats {
  transactions: number
  statements: number
  rows: number
}

export const makeSqlStore = (sql: SqlClient.SqlClient, stats: WriteStats): LedgerStore => {
  const write = <A extends object>(
    rows: ReadonlyArray<A>,
    size: number,
    statement: (rows: Rows<A>) => Effect.Effect<unknown, SqlError.SqlError>
  ) =>
    Effect.forEach(
      chunks(rows, size),
      (chunk) =>
        Effect.tap(
          statement(chunk),
          Effect.sync(() => {
            stats.statements++
            stats.rows += chunk.length
          })
        ),
      { discard: true }
    )

  const applyUpdates = (batch: Batch) =>
    write(
      [...batch.runUpdates.values()],
      1,
      ([update]) =>
        sql`UPDATE runs SET status = COALESCE(${update.status ?? null}, status),
        ended_at = COALESCE(${update.endedAt ?? null}, ended_at),
        heartbeat_at = COALESCE(${update.heartbeatAt ?? null}, heartbeat_at)
        WHERE run_id = ${update.runId}`
    )

  const apply = (batch: Batch) =>
    sql
      .withTransaction(
        Effect.all(
          [
            write(batch.runs, 200, (rows) => sql`INSERT INTO runs ${sql.insert(snakeRows(rows))}`),
            applyUpdates(batch),
            write(
              [...batch.agents.values()],
              400,
              (rows) => sql`INSERT INTO agents ${sql.insert(snakeRows(rows))} ${sql.literal(agentUpsert)}`
            ),
            write(batch.transitions, 1000, (rows) => sql`INSERT INTO transitions ${sql.insert(snakeRows(rows))}`),
            write(
              [...batch.successes.values()],
              400,
              (rows) => sql`INSERT INTO successes ${sql.insert(snakeRows(rows))} ${sql.literal(successUpsert)}`
            )
          ],
          { discard: true }
        )
      )
      .pipe(Effect.tap(Effect.sync(() => stats.transactions++)))

  const one = <A>(rows: ReadonlyArray<Record<string, unknown>>): A | undefined =>
    rows[0] === undefined ? undefined : decode<A>(rows[0])

  return {
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
        sql<Record<string, unknown>>`SELECT run_id, agent_id, at, tag, note, data FROM transitions
          WHERE run_id = ${runId} ORDER BY id`,
        (rows) => rows.map((row) => decode<TransitionRow>(row))
      ),
    success: (key) =>
      Effect.map(sql<Record<string, unknown>>`SELECT * FROM successes WHERE idempotency_key = ${key}`, one<SuccessRow>),
    running: Effect.map(sql<Record<string, unknown>>`SELECT * FROM runs WHERE status = 'running'`, (rows) =>
      rows.map((row) => decode<RunRow>(row))
    )
  }
}
