import type * as Claims from "@corral/core/Claims"
import type * as ResourceLocks from "@corral/core/ResourceLocks"
import * as Effect from "effect/Effect"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as LeaseTables from "../LeaseTables.ts"
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

const createWaiters = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const id = sql.onDialectOrElse({
    pg: () => "BIGSERIAL PRIMARY KEY",
    orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT"
  })
  yield* sql`CREATE TABLE lease_waiters (
    id ${sql.literal(id)}, owner TEXT NOT NULL, pid INTEGER NOT NULL, hostname TEXT NOT NULL,
    run_id TEXT NOT NULL, agent_id TEXT NOT NULL, keys_json TEXT NOT NULL,
    bypassed INTEGER NOT NULL DEFAULT 0, reserved INTEGER NOT NULL DEFAULT 0, free_since BIGINT,
    expires_at BIGINT NOT NULL)`
  yield* sql`CREATE UNIQUE INDEX lease_waiters_holder ON lease_waiters (owner, run_id, agent_id)`
})

/** The lease table's versioned schema, tracked in its own migrations table. */
export const migrate = Migrator.make({})({
  table: "corral_locks_migrations",
  loader: Migrator.fromRecord({ "1_create_leases": createLeases, "2_create_waiters": createWaiters })
})

/**
 * Reservations are reported as blockers with lease ids from this base up (waiter id + base), so they
 * never collide with the ids of leases.
 */
export const RESERVATION_ID_BASE = 2 ** 40

/** This process's identity in the lease table: leases it renews and releases. */
export interface Owner {
  readonly id: string
  readonly pid: number
  readonly hostname: string
}

interface LeaseRow extends LeaseTables.LeaseRow {
  readonly owner: string
}

export interface StoredLease {
  readonly lease: ResourceLocks.Lease
  readonly owner: string
}

const decode = (row: LeaseRow): StoredLease => ({ owner: row.owner, lease: LeaseTables.leaseOfRow(row) })

export type Granted =
  | { readonly _tag: "Acquired"; readonly lease: ResourceLocks.Lease }
  | { readonly _tag: "Blocked"; readonly blockers: ReadonlyArray<ResourceLocks.Blocker> }

export interface Outcome {
  readonly granted: Granted
  /** Leases of any process that expired and were removed. */
  readonly expired: ReadonlyArray<StoredLease>
  /** Unexpired leases before the grant. */
  readonly held: ReadonlyArray<StoredLease>
  /** Reservations of waiters, as leases with ids from {@link RESERVATION_ID_BASE}. */
  readonly reservations: ReadonlyArray<StoredLease>
}

/** The cross-process fairness bound. */
export interface Fairness {
  /** How many grants may overtake a waiter of another process before its keys are reserved for it. */
  readonly maxBypass: number
  /** A reservation not taken this long after it first turned a request away is dropped (its waiter gave up). */
  readonly graceMillis: number
}

interface WaiterRow {
  readonly id: number
  readonly owner: string
  readonly run_id: string
  readonly agent_id: string
  readonly keys_json: string
  readonly reserved: number
  readonly free_since: number | null
}

const asLease = (row: WaiterRow): StoredLease => ({
  owner: row.owner,
  lease: {
    id: RESERVATION_ID_BASE + Number(row.id),
    holder: { runId: row.run_id, agentId: `${row.agent_id} (reserved: waiting longest)` },
    fencingToken: 0,
    request: { keys: JSON.parse(row.keys_json), pools: [] } as unknown as Claims.Request
  }
})

export interface LeaseTable {
  /** Leases not yet expired at `now`, oldest first. */
  readonly live: (now: number) => Effect.Effect<ReadonlyArray<StoredLease>, SqlError.SqlError>
  /** In one `BEGIN IMMEDIATE` transaction: drop expired leases, check conflicts, insert with the next fencing token. */
  readonly tryInsert: (
    holder: ResourceLocks.Holder,
    request: Claims.Request,
    now: number,
    expiresAt: number,
    fairness: Fairness
  ) => Effect.Effect<Outcome, SqlError.SqlError>
  readonly remove: (id: number) => Effect.Effect<void, SqlError.SqlError>
  /** Forgets every waiter of this owner (the process is closing its lock service). */
  readonly removeWaiters: Effect.Effect<void, SqlError.SqlError>
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

  const enqueue = (
    holder: ResourceLocks.Holder,
    request: Claims.Request,
    mine: WaiterRow | undefined,
    expiresAt: number
  ) =>
    mine !== undefined
      ? sql`UPDATE lease_waiters SET expires_at = ${expiresAt} WHERE id = ${mine.id}`
      : request.keys.length === 0
        ? Effect.void
        : sql`INSERT INTO lease_waiters ${sql.insert({
            owner: owner.id,
            pid: owner.pid,
            hostname: owner.hostname,
            run_id: holder.runId,
            agent_id: holder.agentId,
            keys_json: JSON.stringify(request.keys),
            expires_at: expiresAt
          })}`

  /** Reserved waiters of other processes queued before this holder whose keys conflict with the request. */
  const reservedAhead = (request: Claims.Request, waiters: ReadonlyArray<WaiterRow>, mine: WaiterRow | undefined) =>
    blockersOf(
      { keys: request.keys, pools: [] } as unknown as Claims.Request,
      waiters
        .filter((row) => row.owner !== owner.id && row.reserved === 1 && (mine === undefined || row.id < mine.id))
        .map((row) => asLease(row).lease)
    )

  const bypass = (
    request: Claims.Request,
    waiters: ReadonlyArray<WaiterRow>,
    mine: WaiterRow | undefined,
    maxBypass: number
  ) =>
    Effect.gen(function* () {
      const overtaken = new Set(
        blockersOf(
          { keys: request.keys, pools: [] } as unknown as Claims.Request,
          waiters
            .filter((row) => row.owner !== owner.id && (mine === undefined || row.id < mine.id))
            .map((row) => asLease(row).lease)
        ).flatMap((blocker) => (blocker._tag === "Key" ? [blocker.leaseId - RESERVATION_ID_BASE] : []))
      )
      if (overtaken.size === 0) return
      yield* sql`UPDATE lease_waiters SET bypassed = bypassed + 1,
        reserved = CASE WHEN bypassed + 1 >= ${maxBypass} THEN 1 ELSE reserved END
        WHERE ${sql.in("id", [...overtaken])}`
    })

  const tryInsert = (
    holder: ResourceLocks.Holder,
    request: Claims.Request,
    now: number,
    expiresAt: number,
    fairness: Fairness
  ) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const expired = (yield* sql<LeaseRow>`DELETE FROM leases WHERE expires_at <= ${now} RETURNING *`).map(decode)
        yield* sql`DELETE FROM lease_waiters WHERE expires_at <= ${now}
          OR (free_since IS NOT NULL AND free_since <= ${now - fairness.graceMillis})`
        const held = yield* live(now)
        const waiters = yield* sql<WaiterRow>`SELECT id, owner, run_id, agent_id, keys_json, reserved, free_since
          FROM lease_waiters ORDER BY id`
        const reservations = waiters.filter((row) => row.reserved === 1).map(asLease)
        const mine = waiters.find(
          (row) => row.owner === owner.id && row.run_id === holder.runId && row.agent_id === holder.agentId
        )
        const blockers = blockersOf(
          request,
          held.map((stored) => stored.lease)
        )
        if (blockers.length > 0) {
          yield* enqueue(holder, request, mine, expiresAt)
          return { granted: { _tag: "Blocked", blockers }, expired, held, reservations } satisfies Outcome
        }
        const reserved = reservedAhead(request, waiters, mine)
        if (reserved.length > 0) {
          const ids = reserved.flatMap((b) => (b._tag === "Key" ? [b.leaseId - RESERVATION_ID_BASE] : []))
          yield* sql`UPDATE lease_waiters SET free_since = ${now} WHERE free_since IS NULL AND ${sql.in("id", ids)}`
          yield* enqueue(holder, request, mine, expiresAt)
          return { granted: { _tag: "Blocked", blockers: reserved }, expired, held, reservations } satisfies Outcome
        }
        const lease = yield* insert(holder, request, now, expiresAt)
        if (mine !== undefined) yield* sql`DELETE FROM lease_waiters WHERE id = ${mine.id}`
        yield* bypass(request, waiters, mine, fairness.maxBypass)
        return { granted: { _tag: "Acquired", lease }, expired, held, reservations } satisfies Outcome
      })
    )

  const presentWaiters = (ids: ReadonlyArray<number>) =>
    ids.length === 0
      ? Effect.succeed(new Set<number>())
      : Effect.map(
          sql<{ id: number }>`SELECT id FROM lease_waiters WHERE ${sql.in("id", ids)}`,
          (rows) => new Set(rows.map((row) => RESERVATION_ID_BASE + Number(row.id)))
        )

  const removeDead = (isDead: (pid: number) => boolean) =>
    Effect.gen(function* () {
      const owners = yield* sql<{ owner: string; pid: number }>`SELECT DISTINCT owner, pid FROM leases
        WHERE hostname = ${owner.hostname} AND owner <> ${owner.id}`
      const dead = owners.filter((row) => Number(row.pid) !== owner.pid && isDead(Number(row.pid)))
      if (dead.length === 0) return []
      const gone = dead.map((row) => row.owner)
      yield* sql`DELETE FROM lease_waiters WHERE ${sql.in("owner", gone)}`
      const rows = yield* sql<LeaseRow>`DELETE FROM leases WHERE ${sql.in("owner", gone)} RETURNING *`
      return rows.map(decode)
    })

  return {
    live,
    tryInsert,
    removeDead,
    remove: (id) => Effect.asVoid(sql`DELETE FROM leases WHERE id = ${id} AND owner = ${owner.id}`),
    removeWaiters: Effect.asVoid(sql`DELETE FROM lease_waiters WHERE owner = ${owner.id}`),
    renew: (expiresAt) =>
      Effect.andThen(
        sql`UPDATE leases SET expires_at = ${expiresAt} WHERE owner = ${owner.id}`,
        Effect.asVoid(sql`UPDATE lease_waiters SET expires_at = ${expiresAt} WHERE owner = ${owner.id}`)
      ),
    present: (ids, now) => {
      const leases = ids.filter((id) => id < RESERVATION_ID_BASE)
      const waiters = ids.filter((id) => id >= RESERVATION_ID_BASE).map((id) => id - RESERVATION_ID_BASE)
      return Effect.zipWith(
        leases.length === 0
          ? Effect.succeed(new Set<number>())
          : Effect.map(
              sql<{ id: number }>`SELECT id FROM leases WHERE ${sql.in("id", leases)} AND expires_at > ${now}`,
              (rows) => new Set(rows.map((row) => Number(row.id)))
            ),
        presentWaiters(waiters),
        (a, b): ReadonlySet<number> => new Set([...a, ...b])
      )
    }
  }
}
