import type * as Claims from "@corral/core/Claims"
import type * as ResourceLocks from "@corral/core/ResourceLocks"
import { LeaseConflicts, LeaseTables } from "@corral/platform-node"
import * as Effect from "effect/Effect"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as OwnerSession from "../OwnerSession.ts"

/** Advisory-lock namespaces of this table (all of them are listed in `OwnerSession`). */
export const grantLockKey = OwnerSession.namespaces.leaseGrants
export const ownerLockKey = OwnerSession.namespaces.lockOwners

/** The channel releases and reclaims are announced on; the payload is a lease id. */
export const releasedChannel = "corral_lease_released"

const createTables = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE FUNCTION corral_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE
    AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT $$`
  yield* sql`CREATE TABLE corral_lock_owners (
    id SERIAL PRIMARY KEY, pid INTEGER NOT NULL, hostname TEXT NOT NULL, started_at BIGINT NOT NULL)`
  yield* sql`CREATE FUNCTION corral_owner_alive(owner INTEGER) RETURNS BOOLEAN LANGUAGE sql STABLE
    AS $$ SELECT EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted
      AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND p.classid = ${sql.literal(String(ownerLockKey))}::oid AND p.objid = owner::oid AND p.objsubid = 2) $$`
  yield* sql`CREATE TABLE corral_leases (
    id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    owner_id INTEGER NOT NULL, fencing_token BIGINT NOT NULL UNIQUE,
    keys_json TEXT NOT NULL, pools_json TEXT NOT NULL, acquired_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX corral_leases_owner ON corral_leases (owner_id)`
  yield* sql`CREATE SEQUENCE corral_lease_fence`
})

/**
 * Owner liveness across a server restart. A restart ends every session, so every owner's session
 * lock is gone until its service reconnects and takes it again. An owner is alive when it holds its
 * session lock, or when it last took the lock before the server started (it has not had the chance
 * to take it again): its leases then stay until their `expires_at`, as a stopped process's do. An
 * owner that took its lock since the server started and no longer holds it has lost its session
 * (killed, disconnected): dead at once.
 */
const ownerRestarts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE corral_lock_owners ADD COLUMN locked_at BIGINT`
  yield* sql`CREATE OR REPLACE FUNCTION corral_owner_alive(owner INTEGER) RETURNS BOOLEAN LANGUAGE sql STABLE
    AS $$ SELECT EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted
      AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND p.classid = ${sql.literal(String(ownerLockKey))}::oid AND p.objid = owner::oid AND p.objsubid = 2)
    OR EXISTS (SELECT 1 FROM corral_lock_owners o WHERE o.id = owner
      AND o.locked_at < (extract(epoch FROM pg_postmaster_start_time()) * 1000)::BIGINT) $$`
})

/** The lease table's versioned schema, tracked in its own migrations table. */
export const migrate = Migrator.make({})({
  table: "corral_pg_locks_migrations",
  loader: Migrator.fromRecord({ "1_create_leases": createTables, "2_owner_restarts": ownerRestarts })
})

interface LeaseRow extends LeaseTables.LeaseRow {
  readonly owner_id: number
  readonly expires_at: string | number
  readonly now_ms?: string | number
}

export interface StoredLease {
  readonly lease: ResourceLocks.Lease
  readonly owner: number
  readonly expiresAt: number
}

const decode = (row: LeaseRow): StoredLease => ({
  owner: Number(row.owner_id),
  expiresAt: Number(row.expires_at),
  lease: LeaseTables.leaseOfRow(row)
})

export type Granted =
  | { readonly _tag: "Acquired"; readonly lease: ResourceLocks.Lease }
  | { readonly _tag: "Blocked"; readonly blockers: ReadonlyArray<ResourceLocks.Blocker> }

export interface Outcome {
  readonly granted: Granted
  /** Leases that expired or whose owner died, removed by this grant. */
  readonly reclaimed: ReadonlyArray<StoredLease>
  /** Live leases before the grant. */
  readonly held: ReadonlyArray<StoredLease>
  /** Milliseconds from now (database clock) until the first blocking lease expires. */
  readonly blockedFor: number
}

export interface LeaseTable {
  readonly owner: number
  /** Leases of live owners, unexpired, oldest first. */
  readonly live: Effect.Effect<ReadonlyArray<StoredLease>, SqlError.SqlError>
  /**
   * In one transaction under a transaction-scoped advisory lock (so grants are serialized across
   * every machine): reclaim expired leases and leases of dead owners, check conflicts, insert with
   * the next fencing token.
   */
  readonly tryInsert: (
    holder: ResourceLocks.Holder,
    request: Claims.Request
  ) => Effect.Effect<Outcome, SqlError.SqlError>
  /** Deletes one of this owner's leases and announces it; false when it was no longer there. */
  readonly remove: (id: number) => Effect.Effect<boolean, SqlError.SqlError>
  /** Deletes and announces every lease of this owner (when the service closes). */
  readonly removeAll: Effect.Effect<void, SqlError.SqlError>
  /**
   * Extends those of `ids` that are still in the table (whether or not the owner's session is
   * alive right now) and returns them: a missing one was reclaimed by a grant. A lease whose row
   * is still there was not reclaimed, so no conflicting grant happened since it lapsed.
   */
  readonly renew: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlySet<number>, SqlError.SqlError>
  /** Records that this owner holds its session lock again (see {@link migrate}). */
  readonly locked: Effect.Effect<void, SqlError.SqlError>
  /** Of `ids`, those still held by a live owner and unexpired. */
  readonly present: (ids: ReadonlyArray<number>) => Effect.Effect<ReadonlySet<number>, SqlError.SqlError>
  /** Whether `id` is held with `fencingToken` by a live owner and unexpired. */
  readonly isCurrent: (id: number, fencingToken: number) => Effect.Effect<boolean, SqlError.SqlError>
}

const liveCondition = "l.expires_at > corral_now_ms() AND corral_owner_alive(l.owner_id)"

export const registerOwner = (sql: SqlClient.SqlClient, pid: number, hostname: string) =>
  Effect.map(
    sql<{ id: number }>`INSERT INTO corral_lock_owners (pid, hostname, started_at)
      VALUES (${pid}, ${hostname}, corral_now_ms()) RETURNING id`,
    (rows) => Number(rows[0]!.id)
  )

export const makeLeaseTable = (sql: SqlClient.SqlClient, owner: number, ttlMillis: number): LeaseTable => {
  const live = Effect.map(
    sql<LeaseRow>`SELECT * FROM corral_leases l WHERE ${sql.literal(liveCondition)} ORDER BY id`,
    (rows) => rows.map(decode)
  )

  const insert = (holder: ResourceLocks.Holder, request: Claims.Request) =>
    Effect.map(
      sql<{ id: string; fencing_token: string }>`INSERT INTO corral_leases
        (run_id, agent_id, owner_id, fencing_token, keys_json, pools_json, acquired_at, expires_at)
        VALUES (${holder.runId}, ${holder.agentId}, ${owner}, nextval('corral_lease_fence'),
          ${JSON.stringify(request.keys)}, ${JSON.stringify(request.pools)}, corral_now_ms(), corral_now_ms() + ${ttlMillis})
        RETURNING id, fencing_token`,
      ([row]): ResourceLocks.Lease => ({
        id: Number(row!.id),
        holder,
        request,
        fencingToken: Number(row!.fencing_token)
      })
    )

  const reclaim = Effect.map(
    sql<LeaseRow>`WITH gone AS (
        DELETE FROM corral_leases l WHERE NOT (${sql.literal(liveCondition)}) RETURNING *)
      SELECT gone.*, pg_notify(${releasedChannel}, gone.id::text) FROM gone`,
    (rows) => rows.map(decode)
  )

  const tryInsert = (holder: ResourceLocks.Holder, request: Claims.Request) =>
    sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`SELECT pg_advisory_xact_lock(${grantLockKey}, 0)`
        const reclaimed = yield* reclaim
        const rows = yield* sql<LeaseRow>`SELECT l.*, corral_now_ms() AS now_ms FROM corral_leases l ORDER BY id`
        const held = rows.map(decode)
        const blockers = LeaseConflicts.blockersOf(
          request,
          held.map((stored) => stored.lease)
        )
        if (blockers.length === 0) {
          const lease = yield* insert(holder, request)
          return { granted: { _tag: "Acquired", lease }, reclaimed, held, blockedFor: 0 } satisfies Outcome
        }
        const now = rows.length === 0 ? 0 : Number(rows[0]!.now_ms)
        const blocking = new Set(blockers.flatMap((b) => (b._tag === "Key" ? [b.leaseId] : b.leaseIds)))
        const firstExpiry = Math.min(...held.filter((s) => blocking.has(s.lease.id)).map((s) => s.expiresAt))
        return {
          granted: { _tag: "Blocked", blockers },
          reclaimed,
          held,
          blockedFor: Math.max(0, firstExpiry - now)
        } satisfies Outcome
      })
    )

  return {
    owner,
    live,
    tryInsert,
    remove: (id) =>
      Effect.map(
        sql<{
          id: string
        }>`WITH gone AS (DELETE FROM corral_leases WHERE id = ${id} AND owner_id = ${owner} RETURNING id)
          SELECT gone.id, pg_notify(${releasedChannel}, gone.id::text) FROM gone`,
        (rows) => rows.length > 0
      ),
    removeAll: Effect.asVoid(
      sql`WITH gone AS (DELETE FROM corral_leases WHERE owner_id = ${owner} RETURNING id)
        SELECT gone.id, pg_notify(${releasedChannel}, gone.id::text) FROM gone`
    ),
    renew: (ids) =>
      ids.length === 0
        ? Effect.succeed(new Set<number>())
        : Effect.map(
            sql<{ id: string }>`UPDATE corral_leases SET expires_at = corral_now_ms() + ${ttlMillis}
              WHERE owner_id = ${owner} AND ${sql.in("id", ids)} RETURNING id`,
            (rows) => new Set(rows.map((row) => Number(row.id)))
          ),
    locked: Effect.asVoid(sql`UPDATE corral_lock_owners SET locked_at = corral_now_ms() WHERE id = ${owner}`),
    present: (ids) =>
      ids.length === 0
        ? Effect.succeed(new Set<number>())
        : Effect.map(
            sql<{
              id: string
            }>`SELECT id FROM corral_leases l WHERE ${sql.in("id", ids)} AND ${sql.literal(liveCondition)}`,
            (rows) => new Set(rows.map((row) => Number(row.id)))
          ),
    isCurrent: (id, fencingToken) =>
      Effect.map(
        sql<{ id: string }>`SELECT id FROM corral_leases l
          WHERE id = ${id} AND fencing_token = ${fencingToken} AND ${sql.literal(liveCondition)}`,
        (rows) => rows.length > 0
      )
  }
}

/** Whether lease `id` is still held with `fencingToken` by a live owner and unexpired. */
export const leaseIsCurrent = (sql: SqlClient.SqlClient, id: number, fencingToken: number) =>
  Effect.map(
    sql<{ id: string }>`SELECT id FROM corral_leases l
      WHERE id = ${id} AND fencing_token = ${fencingToken} AND ${sql.literal(liveCondition)}`,
    (rows) => rows.length > 0
  )
