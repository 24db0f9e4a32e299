import type { Claims, ResourceLocks } from "@corral/core"
import { Effect } from "effect"
import { Migrator, SqlClient, type SqlError } from "effect/sql"
import { blockersOf } from "./sqliteLocksConflict.ts"

const createLeases = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({
    pg: () => "BIGSERIAL PRIMARY KEY",
    orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT"
  })
  yield* sql`CREATE TABLE leases (
    id ${sql.literal(id)}, run_id TEXT NOT NULL, agent_id TEXT NOT NULL, pid INTEGER NOT NULL,
    hostname TEXT NOT NULL, owner TEXT NOT NULL, fencing_token BIGINT NOT NULL,
    keys_json TEXT NOT NULL, pools_json TEXT NOT NULL, acquired_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)`
  yield* sql`CREATE INDEX leases_expires_at ON leases (expires_at)`
  yield* sql`CREATE INDEX leases_owner ON leases (owner)`
  yield* sql`CREATE TABLE lease_fence (id INTEGER PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL)`
  yield* sql`INSERT INTO lease_fence (id, value) VALUES (1, 0)`
})

/** The lease table's versioned schema, tracked in its own migrations table. */
export const migrate = Migrator.make({})({
  table: "corral_locks_migrations",
  loader: Migrator.fromRecord({ "1_create_leases": createLeases })
})

/** This process's identity in the lease table: leases it renews and releases. */
export interface Owner {
  readonly id: string
  readonly pid: number
  readonly hostname: string
}

interface LeaseRow {
  readonly id: number
  readonly run_id: string
  readonly agent_id: string
  readonly owner: string
  readonly fencing_token: number
  readonly keys_json: string
  readonly pools_json: string
}

export interface StoredLease {
  readonly lease: ResourceLocks.Lease
  readonly owner: string
}

const decode = (row: LeaseRow): StoredLease => ({
  owner: row.owner,
  lease: {
    id: Number(row.id),
    holder: { runId: row.run_id, agentId: row.agent_id },
    fencingToken: Number(row.fencing_token),
    request: { keys: JSON.parse(row.keys_json), pools: JSON.parse(row.pools_json) } as Claims.Request
  }
})

export type Granted =
  | { readonly _tag: "Acquired"; readonly lease: ResourceLocks.Lease }
  | { readonly _tag: "Blocked"; readonly blockers: ReadonlyArray<ResourceLocks.Blocker> }

export interface Outcome {
  readonly granted: Granted
  /** Leases of any process that expired and were removed. */
  readonly expired: ReadonlyArray<StoredLease>
  /** Unexpired leases before the grant. */
  readonly held: ReadonlyArray<StoredLease>
}

export interface LeaseTable {
  /** Leases not yet expired at `now`, oldest first. */
  readonly live: (now: number) => Effect.Effect<ReadonlyArray<StoredLease>, SqlError.SqlError>
  /** In one `BEGIN IMMEDIATE` transaction: drop expired leases, check conflicts, insert with the next fencing token. */
  readonly tryInsert: (
    holder: ResourceLocks.Holder,
    request: Claims.Request,
    now: number,
    expiresAt: number
  ) => Effect.Effect<Outcome, SqlError.SqlError>
  readonly remove: (id: number) => Effect.Effect<void, SqlError.SqlError>
  readonly renew: (expiresAt: number) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Removes the leases of other owners on this host whose process is gone (`isDead(pid)`), at once
   * rather than at expiry, and returns them.
   */
  readonly removeDead: (
    isDead: (pid: number) => boolean
  ) => Effect.Effect<ReadonlyArray<StoredLease>, SqlError.SqlError>
  /** Of `ids`, those still held and unexpired at `now`. */
  readonly present: (ids: ReadonlyArray<number>, now: number) => Effect.Effect<ReadonlySet<number>, SqlError.SqlError>
}

export const makeLeaseTable = (sql: SqlClient.SqlClient, owner: Owner): LeaseTable => {
  const live = (now: number) =>
    Effect.map(sql<LeaseRow>`SELECT * FROM leases WHERE expires_at > ${now} ORDER BY id`, (rows) => rows.map(decode))

  const insert = (holder: ResourceLocks.Holder, request: Claims.Request, now: number, expiresAt: number) =>
    Effect.gen(function* () {
      const [fence] = yield* sql<{
        value: number
      }>`UPDATE lease_fence SET value = value + 1 WHERE id = 1 RETURNING value`
      const fencingToken = Number(fence!.value)
      const [row] = yield* sql<{ id: number }>`INSERT INTO leases ${sql.insert({
        run_id: holder.runId,
        agent_id: holder.agentId,
        pid: owner.pid,
        hostname: owner.hostname,
        owner: owner.id,
        fencing_token: fencingToken,
        keys_json: JSON.stringify(request.keys),
        pools_json: JSON.stringify(request.pools),
        acquired_at: now,
        expires_at: expiresAt
      })} RETURNING id`
      return { id: Number(row!.id), holder, request, fencingToken }
    })

  const tryInsert = (holder: ResourceLocks.Holder, request: Claims.Request, now: number, expiresAt: number) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const expired = (yield* sql<LeaseRow>`DELETE FROM leases WHERE expires_at <= ${now} RETURNING *`).map(decode)
        const held = yield* live(now)
        const blockers = blockersOf(
          request,
          held.map((stored) => stored.lease)
        )
        const granted: Granted =
          blockers.length > 0
            ? { _tag: "Blocked", blockers }
            : { _tag: "Acquired", lease: yield* insert(holder, request, now, expiresAt) }
        return { granted, expired, held }
      })
    )

  const removeDead = (isDead: (pid: number) => boolean) =>
    Effect.gen(function* () {
      const owners = yield* sql<{ owner: string; pid: number }>`SELECT DISTINCT owner, pid FROM leases
        WHERE hostname = ${owner.hostname} AND owner <> ${owner.id}`
      const dead = owners.filter((row) => Number(row.pid) !== owner.pid && isDead(Number(row.pid)))
      if (dead.length === 0) return []
      const rows = yield* sql<LeaseRow>`DELETE FROM leases WHERE ${sql.in(
        "owner",
        dead.map((row) => row.owner)
      )} RETURNING *`
      return rows.map(decode)
    })

  return {
    live,
    tryInsert,
    removeDead,
    remove: (id) => Effect.asVoid(sql`DELETE FROM leases WHERE id = ${id} AND owner = ${owner.id}`),
    renew: (expiresAt) => Effect.asVoid(sql`UPDATE leases SET expires_at = ${expiresAt} WHERE owner = ${owner.id}`),
    present: (ids, now) =>
      ids.length === 0
        ? Effect.succeed(new Set<number>())
        : Effect.map(
            sql<{ id: number }>`SELECT id FROM leases WHERE ${sql.in("id", ids)} AND expires_at > ${now}`,
            (rows) => new Set(rows.map((row) => Number(row.id)))
          )
  }
}
