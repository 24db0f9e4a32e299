/**
 * What agents print on runners, stored in the cluster's database so any machine reads it
 * (`corral logs --cluster`), also while the agent runs. A runner's `corral/process` agents send their
 * output lines, and agents of other kinds the lines they log (`Effect.log*`, {@link capturingLogs}),
 * to the {@link Sink} in context in batches every {@link flushEvery} and when the agent ends; each line is stored with its run, agent, attempt, fencing token and runner. At most
 * {@link maxLinesPerExecution} lines of one execution are stored; a last line then says how many
 * were dropped. Without a sink (a program that does not provide one) nothing is stored.
 *
 * @since 0.1.0
 */
import * as Agent from "@corral/core/Agent"
import * as AgentKind from "@corral/core/AgentKind"
import { PostgresClient } from "@corral/postgres"
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

/**
 * One line an agent printed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Line {
  readonly runId: string
  readonly agentId: string
  readonly attempt: number
  readonly fencingToken: number | undefined
  readonly stream: "stdout" | "stderr"
  readonly text: string
  readonly at: number
}

/**
 * A stored line, with the runner that ran it and its position (ascending in storing order).
 *
 * @since 0.1.0
 * @category models
 */
export interface Stored extends Line {
  readonly id: number
  readonly runner: string
}

/**
 * Where output lines go.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sink {
  readonly write: (lines: ReadonlyArray<Line>) => Effect.Effect<void>
}

/**
 * The sink of this runner; `undefined` (the default) stores nothing.
 *
 * @since 0.1.0
 * @category references
 */
export const CurrentSink = Context.Reference<Sink | undefined>("@corral/cluster/AgentOutput/CurrentSink", {
  defaultValue: () => undefined
})

/**
 * How often a running agent's new lines are stored.
 *
 * @since 0.1.0
 * @category constants
 */
export const flushEvery = "250 millis"

/**
 * The most lines of one execution that are stored.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxLinesPerExecution = 20_000

const createTable = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE corral_agent_output (
    id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, agent_id TEXT NOT NULL, attempt INTEGER NOT NULL,
    fencing_token BIGINT, runner TEXT NOT NULL, stream TEXT NOT NULL, text TEXT NOT NULL, at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX corral_agent_output_agent ON corral_agent_output (agent_id, run_id, id)`
})

const migrate = Migrator.make({})({
  table: "corral_agent_output_migrations",
  loader: Migrator.fromRecord({ "1_create_output": createTable })
})

/**
 * A sink into the `SqlClient` in context (the cluster's Postgres) for runner `runner`; write failures
 * are logged and the lines dropped, never failing the agent.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  runner: string
): Effect.Effect<Sink, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    const write = (lines: ReadonlyArray<Line>) => {
      const rows: Array<Record<string, unknown>> = lines.map((line) => ({
        run_id: line.runId,
        agent_id: line.agentId,
        attempt: line.attempt,
        fencing_token: line.fencingToken ?? null,
        runner,
        stream: line.stream,
        text: line.text,
        at: line.at
      }))
      if (!Arr.isReadonlyArrayNonEmpty(rows)) return Effect.void
      return sql`INSERT INTO corral_agent_output ${sql.insert(rows)}`.pipe(
        Effect.asVoid,
        Effect.catch((error) =>
          Effect.logWarning(
            `corral: could not store ${rows.length} output ${rows.length === 1 ? "line" : "lines"}`,
            error.message
          )
        )
      )
    }
    return { write }
  }).pipe(PostgresClient.answering)

/**
 * Collects one execution's lines for the sink in context: `onLine` for `ProcessRunner.run`, stored
 * every {@link flushEvery} by a fiber of the scope, and `finish` to store the rest at the end.
 *
 * @since 0.1.0
 * @category capturing
 */
export const capture = (
  execution: Omit<Line, "stream" | "text" | "at">
): Effect.Effect<
  {
    readonly onLine: ((line: { readonly stream: Line["stream"]; readonly text: string }) => void) | undefined
    readonly finish: Effect.Effect<void>
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const sink = yield* CurrentSink
    if (sink === undefined) return { onLine: undefined, finish: Effect.void }
    let buffer: Array<Line> = []
    let kept = 0
    let dropped = 0
    const flush = Effect.suspend(() => {
      const lines = buffer
      buffer = []
      return sink.write(lines)
    })
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(flushEvery), flush)))
    const note = Effect.sync(() => {
      if (dropped === 0) return
      buffer.push({
        ...execution,
        stream: "stderr",
        text: `corral: ${dropped} more ${dropped === 1 ? "line was" : "lines were"} not stored (at most ${maxLinesPerExecution} per execution)`,
        at: Date.now()
      })
      dropped = 0
    })
    return {
      onLine: (line) => {
        if (kept >= maxLinesPerExecution) {
          dropped++
          return
        }
        kept++
        buffer.push({ ...execution, stream: line.stream, text: line.text, at: Date.now() })
      },
      finish: Effect.andThen(note, flush)
    }
  })

const textOf = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : (JSON.stringify(part) ?? String(part)))).join(" ")
}

const stderrLevels = new Set(["Fatal", "Error", "Warn"])

/**
 * Runs `effect` (an agent's handler on a runner) with its log lines stored as the agent's output:
 * `[<level>] <message>` (and the cause when there is one), on stderr for warnings and errors. The
 * loggers already in place keep logging. Without a sink in context, `effect` runs unchanged.
 *
 * @since 0.1.0
 * @category capturing
 */
export const withLogs = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.scoped(
    Effect.gen(function* () {
      const me = yield* Agent.current
      const captured = yield* capture({
        runId: me?.runId ?? "",
        agentId: me?.agentId ?? "",
        attempt: me?.attempt ?? 1,
        fencingToken: me?.fencingToken
      })
      const onLine = captured.onLine
      if (onLine === undefined) return yield* effect
      const logger = Logger.make((options) => {
        const cause = options.cause.reasons.length === 0 ? "" : `\n${Cause.pretty(options.cause)}`
        for (const text of `[${options.logLevel}] ${textOf(options.message)}${cause}`.split("\n"))
          onLine({ stream: stderrLevels.has(options.logLevel) ? "stderr" : "stdout", text })
      })
      const loggers = yield* Logger.CurrentLoggers
      return yield* effect.pipe(
        Effect.provideService(Logger.CurrentLoggers, new Set([...loggers, logger])),
        Effect.ensuring(captured.finish)
      )
    })
  )

/**
 * `kind` with its handler run by {@link withLogs}: what a runner registers for kinds other than
 * `corral/process`, so their agents' logs are stored like a process agent's output.
 *
 * @since 0.1.0
 * @category capturing
 */
export const capturingLogs = <I, O, E, R>(kind: AgentKind.AgentKind<I, O, E, R>): AgentKind.AgentKind<I, O, E, R> =>
  AgentKind.make(kind.name, {
    input: kind.input,
    output: kind.output,
    error: kind.error,
    handler: (input) => withLogs(kind.handler(input))
  })

/**
 * The stored lines of `agentId` in `runIds` after position `after`, in storing order.
 *
 * @since 0.1.0
 * @category reading
 */
export const read = (
  runIds: ReadonlyArray<string>,
  agentId: string,
  after = 0
): Effect.Effect<ReadonlyArray<Stored>, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    if (runIds.length === 0) return []
    const rows = yield* sql<{
      id: string | number
      run_id: string
      agent_id: string
      attempt: number
      fencing_token: string | number | null
      runner: string
      stream: string
      text: string
      at: string | number
    }>`SELECT id, run_id, agent_id, attempt, fencing_token, runner, stream, text, at FROM corral_agent_output
      WHERE agent_id = ${agentId} AND ${sql.in("run_id", runIds)} AND id > ${after} ORDER BY id`
    return rows.map(
      (row): Stored => ({
        id: Number(row.id),
        runId: row.run_id,
        agentId: row.agent_id,
        attempt: Number(row.attempt),
        fencingToken: row.fencing_token === null ? undefined : Number(row.fencing_token),
        runner: row.runner,
        stream: row.stream === "stderr" ? "stderr" : "stdout",
        text: row.text,
        at: Number(row.at)
      })
    )
  }).pipe(PostgresClient.answering)
