/**
 * Which runners are online, with their capacity, labels, load, shards and the owner number of their
 * execution leases: a `corral_runners` table each runner upserts on start, refreshes every
 * `heartbeatEvery` (database clock) and as soon as the shards it holds change, and deletes when it
 * stops; a row not refreshed for ten times `heartbeatEvery`, at least a minute (a SIGKILLed
 * runner's), is deleted by the next registration. `corral runners` lists the rows refreshed within
 * `staleAfter`; coordinators read capacity and shards for load-aware placement ({@link placements}),
 * and a stopped run's drain names the runner of each execution lease left (`lease_owner`).
 *
 * @since 0.1.0
 */
import { hostname } from "node:os"
import { PostgresClient, PostgresOptions } from "@corral/postgres"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

const nowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"

const createRunners = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE corral_runners (
    address TEXT PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT NOT NULL, capacity INTEGER NOT NULL,
    labels TEXT NOT NULL, running INTEGER NOT NULL, started_at BIGINT NOT NULL, heartbeat_at BIGINT NOT NULL)`
})

const addShards = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE corral_runners ADD COLUMN shards TEXT NOT NULL DEFAULT '{}'`
})

const addLeaseOwner = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE corral_runners ADD COLUMN lease_owner INTEGER`
})

const migrate = Migrator.make({})({
  table: "corral_runners_migrations",
  loader: Migrator.fromRecord({
    "1_create_runners": createRunners,
    "2_add_shards": addShards,
    "3_add_lease_owner": addLeaseOwner
  })
})

/**
 * A runner as listed.
 *
 * @since 0.1.0
 * @category models
 */
export const RunnerInfo = Schema.Struct({
  address: Schema.String,
  pid: Schema.Number,
  hostname: Schema.String,
  capacity: Schema.Number,
  labels: Schema.Array(Schema.String),
  running: Schema.Number,
  startedAt: Schema.Number,
  /** Milliseconds since its last heartbeat (database clock). */
  idleMs: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type RunnerInfo = typeof RunnerInfo.Type

interface Row {
  readonly address: string
  readonly pid: number
  readonly hostname: string
  readonly capacity: number
  readonly labels: string
  readonly running: number
  readonly started_at: string
  readonly idle_ms: string
}

/**
 * Runners whose last heartbeat is at most `staleAfter` old, by address.
 *
 * @example
 * ```ts
 * import { RunnerRegistry } from "@corral/cluster"
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const runners = yield* RunnerRegistry.list() // runners seen within the last 10 seconds
 *   for (const runner of runners) {
 *     yield* Effect.log(`${runner.address}: ${runner.running}/${runner.capacity} running`)
 *   }
 * }).pipe(Effect.provide(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral"))) // the cluster's database
 * ```
 * @since 0.1.0
 * @category queries
 */
export const list = (
  staleAfterMs = 10_000,
  options: {
    /** Run the table's migrations first (a reader that polls needs them once). @default true */
    readonly migrate?: boolean | undefined
  } = {}
): Effect.Effect<ReadonlyArray<RunnerInfo>, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    if (options.migrate !== false) yield* migrate
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<Row>`SELECT address, pid, hostname, capacity, labels, running, started_at,
      ${sql.literal(nowMs)} - heartbeat_at AS idle_ms FROM corral_runners
      WHERE heartbeat_at > ${sql.literal(nowMs)} - ${staleAfterMs} ORDER BY address`
    return rows.map((row) => ({
      address: row.address,
      pid: Number(row.pid),
      hostname: row.hostname,
      capacity: Number(row.capacity),
      labels: JSON.parse(row.labels) as Array<string>,
      running: Number(row.running),
      startedAt: Number(row.started_at),
      idleMs: Number(row.idle_ms)
    }))
  }).pipe(PostgresClient.answering)

/**
 * A live runner as load-aware placement sees it: capacity and the shards it holds, by shard group.
 *
 * @since 0.1.0
 * @category models
 */
export interface Placement {
  readonly address: string
  readonly capacity: number
  readonly shards: Readonly<Record<string, ReadonlyArray<number>>>
}

/**
 * Runners refreshed within `staleAfter`, least recently refreshed first (so that a shard listed by
 * a runner that died and by its new owner ends up with the new owner).
 *
 * @since 0.1.0
 * @category queries
 */
export const placements = (
  staleAfterMs = 5_000,
  options: {
    /** Run the table's migrations first. @default true */
    readonly migrate?: boolean | undefined
  } = {}
): Effect.Effect<ReadonlyArray<Placement>, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    if (options.migrate !== false) yield* migrate
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ address: string; capacity: number; shards: string }>`SELECT address, capacity, shards
      FROM corral_runners WHERE heartbeat_at > ${sql.literal(nowMs)} - ${staleAfterMs}
      ORDER BY heartbeat_at, address`
    return rows.map((row) => ({
      address: row.address,
      capacity: Number(row.capacity),
      shards: JSON.parse(row.shards) as Record<string, ReadonlyArray<number>>
    }))
  }).pipe(PostgresClient.answering)

/**
 * How long after its last heartbeat a runner's row is deleted by the next registration: ten times
 * the registering runner's `heartbeatEvery`, at least a minute. Readers skip it after 10 s (`list`)
 * or 5 s (placement) already; a live runner whose row was deleted writes it again with its next
 * heartbeat.
 */
const deadRowAfter = (everyMs: number): number => Math.max(60_000, 10 * everyMs)

/**
 * @since 0.1.0
 * @category models
 */
export interface Registration {
  readonly address: string
  readonly capacity: number
  readonly labels: ReadonlyArray<string>
  /**
   * The owner number of its execution leases (`owner_id` in `corral_executions`), recorded as
   * `lease_owner` so that a lease names the runner that holds it.
   */
  readonly leaseOwner?: number | undefined
  /** How many agents run now. */
  readonly running: () => number
  /** The shards it holds now, by shard group; published within `shardsCheckEvery` of a change. */
  readonly shards?: (() => Readonly<Record<string, ReadonlyArray<number>>>) | undefined
  /** Above 0 and finite, like `shardsCheckEvery`. @default "2 seconds" */
  readonly heartbeatEvery?: Duration.Input | undefined
  /** @default "100 millis" */
  readonly shardsCheckEvery?: Duration.Input | undefined
}

/**
 * Registers this runner until the scope closes, refreshing its row in the background (written
 * again if it was deleted), after deleting the rows of runners whose last heartbeat is older than
 * ten times `heartbeatEvery`, at least a minute (SIGKILLed runners, whose rows nothing else
 * deletes). An interval it cannot use dies with `PostgresOptions.InvalidOption` naming it, before
 * anything is written; creating the table or writing the row fails with `PostgresClient.StartFailed`
 * saying the server's answer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const register = (
  registration: Registration
): Effect.Effect<void, PostgresClient.StartFailed, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const every = yield* PostgresOptions.duration(
      "RunnerRegistry",
      "heartbeatEvery",
      registration.heartbeatEvery ?? "2 seconds",
      true
    )
    const check = yield* PostgresOptions.duration(
      "RunnerRegistry",
      "shardsCheckEvery",
      registration.shardsCheckEvery ?? "100 millis",
      true
    )
    yield* migrate
    const sql = yield* SqlClient.SqlClient
    const labels = JSON.stringify(registration.labels)
    const row = (shards: string) => sql`INSERT INTO corral_runners
      (address, pid, hostname, capacity, labels, running, shards, lease_owner, started_at, heartbeat_at)
      VALUES (${registration.address}, ${process.pid}, ${hostname()}, ${registration.capacity}, ${labels},
        ${registration.running()}, ${shards}, ${registration.leaseOwner ?? null}, ${sql.literal(nowMs)},
        ${sql.literal(nowMs)})`
    const write = sql`${row("{}")} ON CONFLICT (address) DO UPDATE SET pid = excluded.pid,
      hostname = excluded.hostname, capacity = excluded.capacity, labels = excluded.labels,
      running = excluded.running, shards = excluded.shards, lease_owner = excluded.lease_owner,
      heartbeat_at = excluded.heartbeat_at`
    yield* sql`DELETE FROM corral_runners WHERE heartbeat_at < ${sql.literal(nowMs)} - ${deadRowAfter(every)}`
    yield* Effect.acquireRelease(write, () =>
      Effect.ignore(sql`DELETE FROM corral_runners WHERE address = ${registration.address} AND pid = ${process.pid}`)
    )
    const shardsNow = () => JSON.stringify(registration.shards?.() ?? {})
    let published = "{}"
    // an upsert: a row deleted as long dead (this runner cut off from the server that long) comes back
    const heartbeat = () => {
      const shards = shardsNow()
      return Effect.as(
        sql`${row(shards)} ON CONFLICT (address) DO UPDATE SET running = excluded.running,
          shards = excluded.shards, heartbeat_at = excluded.heartbeat_at`,
        shards
      )
    }
    const beat = Effect.suspend(heartbeat).pipe(
      Effect.tap((shards) => Effect.sync(() => (published = shards))),
      Effect.catch((error) => Effect.logWarning("corral: runner heartbeat failed", error.message))
    )
    let lastBeat = Date.now()
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(
          Effect.sleep(check),
          Effect.suspend(() => {
            if (Date.now() - lastBeat < every && shardsNow() === published) return Effect.void
            lastBeat = Date.now()
            return beat
          })
        )
      )
    )
  }).pipe(PostgresClient.starting("RunnerRegistry"))

/**
 * No runner is online, or none carries a label that agents require.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoRunner extends Data.TaggedError("NoRunner")<{
  /** The missing label; `undefined` when no runner at all is online. */
  readonly label: string | undefined
  /** Labels the online runners carry. */
  readonly available: ReadonlyArray<string>
}> {
  override get message(): string {
    if (this.label === undefined) return "no runner is online (start one with `corral runner --cluster <url>`)"
    const known = this.available.length === 0 ? "none" : this.available.join(", ")
    return `no runner online has the label "${this.label}" (labels online: ${known})`
  }
}

/**
 * Checks, before a run starts, that a runner is online and that every label in `required` is
 * carried by one; fails with {@link NoRunner} naming the first missing label.
 *
 * @example
 * ```ts
 * import { RunnerRegistry } from "@corral/cluster"
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const program = RunnerRegistry.check(["gpu"]).pipe(
 *   // NoRunner: no runner online has the label "gpu" (labels online: ...)
 *   Effect.catchTag("NoRunner", (error) => Effect.logError(error.message)),
 *   Effect.provide(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral"))
 * )
 * ```
 * @since 0.1.0
 * @category queries
 */
export const check = (required: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const runners = yield* list()
    if (runners.length === 0) return yield* new NoRunner({ label: undefined, available: [] })
    const available = [...new Set(runners.flatMap((runner) => runner.labels))].sort()
    const missing = required.find((label) => !available.includes(label))
    if (missing !== undefined) return yield* new NoRunner({ label: missing, available })
  })
