/**
 * Execution leases: which runner may execute an agent now, with a fencing token.
 *
 * One row per agent in `corral_executions`, taken with one statement (`INSERT ... ON CONFLICT DO
 * UPDATE ... WHERE` the holder's lease expired or its owner's session is gone) and given back with one
 * (`DELETE ... RETURNING` whether it was still current). `PostgresLocks` is not used for this: its
 * grants are serialized across the whole database (one advisory lock, then a scan of every lease) for
 * folder-level conflicts and pools, which one exact key per agent does not need. Counted in the
 * server's statement log, a runner sent about 16 statements to Postgres per no-op agent with them, 8
 * for the lease (6 in one transaction under that database-wide lock), and sends about 10 now, 2 for
 * the lease.
 *
 * - Expiry from the database clock; a holder renews its own leases (by fencing token) every `renewEvery`.
 * - Owner liveness as in `PostgresLocks`: each service holds a session advisory lock on its owner id
 *   through a dedicated connection, so a lease of a killed runner is taken over without waiting for
 *   its TTL; a stopped runner (connection open) loses it at the TTL.
 * - Fencing tokens come from one sequence, so a later holder of a key always has a larger token.
 * - A taker blocked by a live lease retries every `retryEvery` (only a re-delivered agent whose old
 *   execution is still leased waits here).
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

/**
 * The advisory-lock namespace (first key) of owners of execution leases. Namespaces share one key
 * space per database: `@corral/postgres` uses 0x636f7200 (lease grants), 0x636f7201 (lock owners),
 * 0x636f7202 (coordinators) and 0x636f7203 (lineages); reusing one makes unrelated owners block
 * each other.
 */
const ownerLockKey = 0x636f7204

const nowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"

const ownerAlive = (column: string) => `EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted
  AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND p.classid = ${ownerLockKey}::oid AND p.objid = ${column}::oid AND p.objsubid = 2)`

const migrate = Migrator.make({})({
  table: "corral_executions_migrations",
  loader: Migrator.fromRecord({
    "1_create_executions": Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE corral_executions (
        entity TEXT PRIMARY KEY, owner_id INTEGER NOT NULL, fencing_token BIGINT NOT NULL UNIQUE,
        expires_at BIGINT NOT NULL)`
      yield* sql`CREATE SEQUENCE corral_executions_fence`
      yield* sql`CREATE SEQUENCE corral_executions_owner`
    })
  })
})

export interface ExecutionLease {
  readonly entity: string
  readonly fencingToken: number
}

export interface ExecutionLeases {
  /**
   * Waits until `entity` is free (never taken, released, expired, or its owner gone) and takes it.
   * Call it uninterruptibly: it is interruptible only while it queries or waits.
   */
  readonly acquire: (entity: string) => Effect.Effect<ExecutionLease>
  /** Whether `lease` is unexpired and still carries its fencing token. */
  readonly isCurrent: (lease: ExecutionLease) => Effect.Effect<boolean, SqlError.SqlError>
  /** Gives `lease` back; true when it was still current until then. */
  readonly release: (lease: ExecutionLease) => Effect.Effect<boolean, SqlError.SqlError>
}

export interface Options {
  readonly ttl: Duration.Input
  readonly renewEvery: Duration.Input
  readonly retryEvery: Duration.Input
}

const warn = (what: string) => (error: { readonly message: string }) =>
  Effect.logWarning(`corral: execution leases: ${what}`, error.message)

/** Holds the owner's session advisory lock on a dedicated connection, re-taking it after a reconnect. */
const holdOwnerLock = (
  sql: SqlClient.SqlClient,
  owner: number,
  checkEvery: Duration.Input,
  held: Deferred.Deferred<void>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const connection = yield* sql.reserve
      yield* connection.execute("SELECT pg_advisory_lock($1, $2)", [ownerLockKey, owner], undefined)
      yield* Deferred.succeed(held, undefined)
      return yield* Effect.forever(
        Effect.andThen(Effect.sleep(checkEvery), connection.execute("SELECT 1", [], undefined))
      )
    })
  ).pipe(
    Effect.catch(warn("the owner's session was lost; reconnecting")),
    Effect.andThen(Effect.sleep("200 millis")),
    Effect.forever
  )

/**
 * Runs the table's migrations, registers an owner and takes its session lock, and renews this
 * owner's leases in the current scope.
 */
export const make = (
  options: Options
): Effect.Effect<ExecutionLeases, SqlError.SqlError | Migrator.MigrationError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    const ttl = Duration.toMillis(Duration.fromInputUnsafe(options.ttl))
    const [row] = yield* sql<{ owner: string }>`SELECT nextval('corral_executions_owner') AS owner`
    const ownerId = Number(row!.owner)
    const ownerHeld = Deferred.makeUnsafe<void>()
    yield* Effect.forkScoped(holdOwnerLock(sql, ownerId, options.renewEvery, ownerHeld))
    yield* Deferred.await(ownerHeld)
    const held = new Set<number>()

    const take = (entity: string) =>
      sql<{ fencing_token: string }>`INSERT INTO corral_executions AS e (entity, owner_id, fencing_token, expires_at)
        VALUES (${entity}, ${ownerId}, nextval('corral_executions_fence'), ${sql.literal(nowMs)} + ${ttl})
        ON CONFLICT (entity) DO UPDATE SET owner_id = EXCLUDED.owner_id, fencing_token = EXCLUDED.fencing_token,
          expires_at = EXCLUDED.expires_at
        WHERE e.expires_at <= ${sql.literal(nowMs)} OR NOT ${sql.literal(ownerAlive("e.owner_id"))}
        RETURNING fencing_token`

    // Interruptible only while it queries or waits: called uninterruptibly, a lease it returns
    // is always in the caller's hands, and one taken by an interrupted query is not renewed and lapses.
    const retry = (entity: string) =>
      Effect.andThen(
        Effect.interruptible(Effect.sleep(options.retryEvery)),
        Effect.suspend(() => acquire(entity))
      )
    const acquire = (entity: string): Effect.Effect<ExecutionLease> =>
      Effect.matchEffect(Effect.interruptible(take(entity)), {
        onFailure: (error) =>
          Effect.andThen(warn(`taking the lease of ${entity} failed; retrying`)(error), retry(entity)),
        onSuccess: ([taken]) =>
          taken === undefined
            ? retry(entity)
            : Effect.sync(() => {
                const fencingToken = Number(taken.fencing_token)
                held.add(fencingToken)
                return { entity, fencingToken }
              })
      })

    const renew = Effect.suspend(() => {
      if (held.size === 0) return Effect.void
      const tokens = [...held]
      return Effect.map(
        sql<{ fencing_token: string }>`UPDATE corral_executions SET expires_at = ${sql.literal(nowMs)} + ${ttl}
          WHERE ${sql.in("fencing_token", tokens)} AND owner_id = ${ownerId} AND expires_at > ${sql.literal(nowMs)}
          RETURNING fencing_token`,
        (rows) => {
          const still = new Set(rows.map((row) => Number(row.fencing_token)))
          for (const token of tokens) if (!still.has(token)) held.delete(token)
        }
      )
    })
    yield* Effect.forkScoped(
      Effect.forever(Effect.andThen(Effect.sleep(options.renewEvery), Effect.catch(renew, warn("renewing failed"))))
    )

    return {
      acquire,
      isCurrent: (lease) =>
        Effect.map(
          sql`SELECT 1 FROM corral_executions WHERE entity = ${lease.entity}
            AND fencing_token = ${lease.fencingToken} AND expires_at > ${sql.literal(nowMs)}`,
          (rows) => rows.length > 0
        ),
      release: (lease) =>
        Effect.suspend(() => {
          held.delete(lease.fencingToken)
          return Effect.map(
            sql<{ current: boolean }>`DELETE FROM corral_executions
              WHERE entity = ${lease.entity} AND fencing_token = ${lease.fencingToken}
              RETURNING expires_at > ${sql.literal(nowMs)} AS current`,
            (rows) => rows[0]?.current === true
          )
        })
    } satisfies ExecutionLeases
  })
