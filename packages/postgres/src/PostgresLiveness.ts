/**
 * `RunLiveness` in Postgres: any machine that reaches the cluster's database can tell a crashed
 * coordinator from a live one, where a recorded pid means nothing.
 *
 * A coordinator registers a row in `corral_run_coordinators` (run, lineage, pid, host) and, through
 * one dedicated connection, holds a session advisory lock on it and writes a heartbeat from the
 * **database clock** every `heartbeatEvery`. It is alive while its lock is held (its Postgres session
 * exists: a SIGKILLed process's connection closes and the lock goes with it) or its heartbeat is
 * younger than `grace` (which covers the moments after a Postgres restart, before it has taken its
 * lock again). A stopped (SIGSTOP) coordinator keeps its connection, so it counts as alive.
 *
 * `hold` with a lineage checks and registers in one transaction under a transaction-scoped advisory
 * lock on the lineage, so of two coordinators resuming one run at once, one fails with
 * `LineageBusy`. The same transaction deletes the rows of coordinators long dead (SIGKILLed: their
 * lock is not held and their last heartbeat is older than ten times `grace`, at least a minute), which
 * nothing else would delete; a coordinator whose row went so while it was only cut off from the
 * server writes it again with its next heartbeat once it has its lock back.
 *
 * @since 0.1.0
 */
import { hostname } from "node:os"
import { RunLedger, RunLiveness } from "@corral/platform-node"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import * as OwnerSession from "./OwnerSession.ts"
import * as PostgresClient from "./PostgresClient.ts"
import * as PostgresOptions from "./PostgresOptions.ts"

/** Advisory-lock namespaces (all of them are listed in `OwnerSession`). */
const runLockKey = OwnerSession.namespaces.coordinators
const lineageLockKey = OwnerSession.namespaces.lineages

const nowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"

const createTable = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE corral_run_coordinators (
    id SERIAL PRIMARY KEY, run_id TEXT NOT NULL UNIQUE, lineage TEXT NOT NULL,
    pid INTEGER NOT NULL, hostname TEXT NOT NULL, heartbeat_at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX corral_run_coordinators_lineage ON corral_run_coordinators (lineage)`
})

const migrate = Migrator.make({})({
  table: "corral_liveness_migrations",
  loader: Migrator.fromRecord({ "1_create_coordinators": createTable })
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * How often a coordinator writes its heartbeat (and checks its connection): above 0 and finite.
   * @default "1 second"
   */
  readonly heartbeatEvery?: Duration.Input | undefined
  /**
   * How long a coordinator without its lock still counts as alive after its last heartbeat: above 0
   * and finite. `0`, taken before session 18, is refused: it counted a coordinator dead the moment
   * its lock's session dropped (a Postgres restart), until it took its lock again. @default "5 seconds"
   */
  readonly grace?: Duration.Input | undefined
}

/**
 * How long after its last heartbeat a coordinator row whose lock is not held is deleted (by the next
 * registration): ten times `grace`, at least a minute. It has counted as dead since `grace`, so the
 * deletion changes no answer of `alive`; a coordinator cut off from the server that long and then
 * back writes its row again with its next heartbeat, and counts as alive again, as before.
 */
const deadRowAfter = (graceMs: number): number => Math.max(60_000, 10 * graceMs)

/**
 * A coordinator's heartbeat (`$1` its row's id; `$2`–`$5` run, lineage, pid, host): refreshes its
 * row, or writes it again when a registration deleted it as long dead while this coordinator was
 * cut off from the server, so that its run counts as alive again once its lock is back.
 */
const heartbeat = `WITH beat AS (
    UPDATE corral_run_coordinators SET heartbeat_at = ${nowMs} WHERE id = $1 RETURNING id)
  INSERT INTO corral_run_coordinators (id, run_id, lineage, pid, hostname, heartbeat_at)
  SELECT $1::INTEGER, $2::TEXT, $3::TEXT, $4::INTEGER, $5::TEXT, ${nowMs} WHERE NOT EXISTS (SELECT 1 FROM beat)
  ON CONFLICT DO NOTHING`

const ledgerError = (operation: string) => (error: Parameters<typeof PostgresClient.withServerAnswer>[0]) =>
  new RunLedger.RunLedgerError({ operation, message: PostgresClient.withServerAnswer(error) })

/**
 * The liveness service over the `SqlClient` in context (a `PgClient`); runs its migration first. An
 * interval it cannot use (not a duration, `NaN`, 0, `Infinity`, a negative one, an object effect
 * would misread such as `{ seconds: true }`) makes it die with `PostgresOptions.InvalidOption`
 * naming the option, before it touches the database.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<RunLiveness.Service, RunLedger.RunLedgerError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const every = yield* PostgresOptions.duration(
      "PostgresLiveness",
      "heartbeatEvery",
      options.heartbeatEvery ?? "1 second",
      true
    )
    const graceMs = yield* PostgresOptions.duration("PostgresLiveness", "grace", options.grace ?? "5 seconds", true)
    const sql = yield* SqlClient.SqlClient
    yield* migrate.pipe(Effect.mapError(ledgerError("migrate")))
    const alive = sql.unsafe(`(${OwnerSession.heldSql(runLockKey, "c.id")}
      OR c.heartbeat_at > ${nowMs} - ${graceMs})`)
    const longDead = sql.unsafe(`(NOT ${OwnerSession.heldSql(runLockKey, "c.id")}
      AND c.heartbeat_at < ${nowMs} - ${deadRowAfter(graceMs)})`)

    const register = (runId: string, lineage: string) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT pg_advisory_xact_lock(${lineageLockKey}, hashtext(${lineage}))`
          yield* sql`DELETE FROM corral_run_coordinators c WHERE ${longDead}`
          const busy = yield* sql<{ run_id: string; pid: number; hostname: string }>`
            SELECT c.run_id, c.pid, c.hostname FROM corral_run_coordinators c
            WHERE c.lineage = ${lineage} AND ${alive} LIMIT 1`
          if (busy[0] !== undefined) {
            const { run_id, pid, hostname } = busy[0]
            return yield* new RunLiveness.LineageBusy({ lineage, runId: run_id, pid: Number(pid), hostname })
          }
          const rows = yield* sql<{ id: number }>`
            INSERT INTO corral_run_coordinators (run_id, lineage, pid, hostname, heartbeat_at)
            VALUES (${runId}, ${lineage}, ${process.pid}, ${hostname()}, ${sql.unsafe(nowMs)}) RETURNING id`
          return Number(rows[0]!.id)
        })
      )

    const hold = (run: { readonly runId: string; readonly lineage?: string | undefined }) =>
      Effect.gen(function* () {
        const id = yield* Effect.acquireRelease(
          register(run.runId, run.lineage ?? run.runId).pipe(
            Effect.catchTag("SqlError", (error) => Effect.fail(ledgerError("hold")(error)))
          ),
          (id) => Effect.ignore(sql`DELETE FROM corral_run_coordinators WHERE id = ${id}`)
        )
        yield* OwnerSession.hold({
          namespace: runLockKey,
          owner: id,
          every,
          heartbeat,
          heartbeatParams: [run.runId, run.lineage ?? run.runId, process.pid, hostname()],
          lost: "corral: the coordinator's Postgres session was lost; reconnecting"
        }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      })

    return RunLiveness.RunLiveness.of({
      hold,
      alive: (runs) =>
        runs.length === 0
          ? Effect.succeed(new Set<string>())
          : sql<{ run_id: string }>`SELECT c.run_id FROM corral_run_coordinators c
              WHERE ${sql.in(
                "c.run_id",
                runs.map((run) => run.runId)
              )} AND ${alive}`.pipe(
              Effect.map((rows) => new Set(rows.map((row) => row.run_id))),
              Effect.mapError(ledgerError("alive"))
            )
    })
  })

/**
 * The liveness service over the `SqlClient` in context.
 *
 * @example
 * ```ts
 * import { RunLedger, RunLiveness } from "@corral/platform-node"
 * import { PostgresClient, PostgresLedger, PostgresLiveness } from "@corral/postgres"
 * import { Effect, Layer } from "effect"
 *
 * const client = PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral")
 * const stores = Layer.merge(RunLedger.layerSql(), PostgresLiveness.layerClient()).pipe(Layer.provide(client))
 * const crashed = RunLiveness.markCrashed.pipe(Effect.provide(stores)) // ids of runs whose coordinator is gone
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (
  options?: Options
): Layer.Layer<RunLiveness.RunLiveness, RunLedger.RunLedgerError, SqlClient.SqlClient> =>
  Layer.effect(RunLiveness.RunLiveness, make(options))

/**
 * The liveness service over its own pool to `url`.
 *
 * @example
 * ```ts
 * import { RunLiveness } from "@corral/platform-node"
 * import { PostgresLiveness } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const program = Effect.scoped(
 *   Effect.flatMap(RunLiveness.RunLiveness, (liveness) => liveness.hold({ runId: "r1" }))
 * ) // r1 counts as alive on every machine while the scope is open
 * Effect.provide(program, PostgresLiveness.layer("postgres://postgres@127.0.0.1:5432/corral"))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  url: string,
  options?: Options & PostgresClient.Options
): Layer.Layer<RunLiveness.RunLiveness, RunLedger.RunLedgerError | PostgresClient.PostgresUnavailable> =>
  layerClient(options).pipe(Layer.provide(PostgresClient.layer(url, options)))
