/**
 * Resource claims shared by every process on every machine that opens the same Postgres database:
 * a `ResourceLocks` implementation over a lease table.
 *
 * - **Source of truth**: the `corral_leases` table (keys with read/write modes and folder-level
 *   conflicts, counted pools, blocker names), the same conflict rules as the SQLite lease table.
 * - **Grants are serialized**: each grant runs in one transaction that first takes a
 *   transaction-scoped advisory lock (`pg_advisory_xact_lock`), then reclaims dead leases, checks
 *   conflicts and inserts. Postgres's default isolation alone lets two services both be granted one
 *   write key.
 * - **Expiry from the database clock**: `expires_at` is `corral_now_ms() + ttl` computed by the
 *   server (so `ttl` is measured by the database clock), renewed every `renewEvery`; machines'
 *   clocks never enter.
 * - **Owner liveness**: each service registers an owner row and holds a session advisory lock on it
 *   through one dedicated connection, checked every `renewEvery`. A lease whose owner's session is
 *   gone (process killed, connection closed) is reclaimed by the next grant attempt, without waiting
 *   for the TTL; a stopped process that keeps its connection loses its leases at the TTL.
 * - **Server restarts**: a restart ends every session. An owner that took its session lock before
 *   the server started is not presumed dead: its leases stay until their TTL, and once the service
 *   has reconnected and taken its lock again they are renewed as before. A lease is dropped from the
 *   service only when its row is gone (a grant reclaimed it), so a release always deletes the row.
 *   Waiters retry through connection errors; a release that cannot reach the server is retried with
 *   the next renewal.
 * - **Wake-ups**: releases and reclaims `NOTIFY corral_lease_released` with the lease id; every
 *   service `LISTEN`s and wakes its waiters and `onRelease` listeners. After re-`LISTEN`ing (a
 *   notification sent meanwhile is lost) every waiter tries again and watched leases are looked up.
 *   Waiters also retry every `pollEvery` and when the first lease blocking them expires, which covers
 *   dead owners whom no one announces.
 * - **Fencing tokens** come from one sequence, taken inside the serialized grant, so they increase
 *   with every grant on every machine.
 *
 * @since 0.1.0
 */
import { hostname } from "node:os"
import type * as Claims from "@corral/core/Claims"
import * as ResourceLocks from "@corral/core/ResourceLocks"
import { LeaseConflicts, LeaseTables } from "@corral/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as SqlError from "effect/sql/SqlError"
import {
  type LeaseTable,
  leaseIsCurrent,
  makeLeaseTable,
  migrate,
  registerOwner,
  releasedChannel,
  type StoredLease
} from "./internal/leaseTable.ts"
import * as OwnerSession from "./OwnerSession.ts"
import * as PostgresClient from "./PostgresClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends LeaseTables.TimingOptions {
  /** How often a waiter retries when no release is announced (dead owners, missed notifications). @default "500 millis" */
  readonly pollEvery?: Duration.Input | undefined
}

/**
 * Migrating the lease table, registering the owner or taking its session lock failed; the message
 * names `PostgresLocks` and says the server's answer.
 *
 * @since 0.1.0
 * @category errors
 */
export type LocksError = PostgresClient.StartFailed

type Lease = ResourceLocks.Lease

interface Waiter {
  readonly holder: ResourceLocks.Holder
  readonly request: Claims.Request
}

const die = <A>(effect: Effect.Effect<A, SqlError.SqlError>): Effect.Effect<A> => Effect.orDie(effect)

/** What this service knows locally: its own leases, other owners' leases that block it, who waits. */
class State {
  readonly local = new Map<number, Lease>()
  readonly watched = new Map<number, Lease>()
  readonly waiters = new Set<Waiter>()
  readonly listeners = new Set<(lease: Lease) => void>()
  /** Leases released here whose row could not be deleted yet (the server was unreachable). */
  readonly unreleased = new Set<number>()
  signal = Deferred.makeUnsafe<void>()

  wake(): void {
    const signal = this.signal
    this.signal = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(signal, Effect.void)
  }

  released(lease: Lease): void {
    this.watched.delete(lease.id)
    for (const listener of this.listeners) listener(lease)
    this.wake()
  }

  /** A release announced by some service. */
  announced(id: number): void {
    const lease = this.watched.get(id)
    if (lease !== undefined) this.released(lease)
    else this.wake()
  }

  forget(held: ReadonlyArray<StoredLease>): void {
    if (this.watched.size === 0) return
    const present = new Set(held.map((stored) => stored.lease.id))
    for (const lease of [...this.watched.values()]) if (!present.has(lease.id)) this.released(lease)
  }

  watch(held: ReadonlyArray<StoredLease>, owner: number, blockers: ReadonlyArray<ResourceLocks.Blocker>): void {
    const ids = new Set(blockers.flatMap((b) => (b._tag === "Key" ? [b.leaseId] : b.leaseIds)))
    for (const stored of held) {
      if (stored.owner !== owner && ids.has(stored.lease.id)) this.watched.set(stored.lease.id, stored.lease)
    }
  }
}

/**
 * A failure that a reconnect cures: a connection error, or the server shutting down or starting up
 * (SQLSTATE class 57P: `admin_shutdown`, `crash_shutdown`, `cannot_connect_now`).
 */
const isTransient = (error: SqlError.SqlError): boolean => {
  if (error.isRetryable) return true
  const code = (error.cause.cause as { readonly code?: unknown } | undefined)?.code
  return typeof code === "string" && code.startsWith("57P")
}

/**
 * `withTransaction` turns a failed ROLLBACK or COMMIT on a dead connection into defects; a cause made
 * only of transient SQL errors (failures or such defects) becomes the first of them as a failure.
 */
const transientAsFailure = <A>(effect: Effect.Effect<A, SqlError.SqlError>): Effect.Effect<A, SqlError.SqlError> =>
  Effect.catchCause(effect, (cause) => {
    const errors = cause.reasons.map((reason) =>
      Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    )
    const transient = errors.filter(
      (error): error is SqlError.SqlError => SqlError.isSqlError(error) && isTransient(error)
    )
    return transient.length > 0 && transient.length === errors.length
      ? Effect.fail(transient[0]!)
      : Effect.failCause(cause)
  })

/** How long to wait before reconnecting, re-listening or retrying a grant after a connection error. */
const reconnectDelay = "200 millis"

/**
 * Retries `effect` after transient errors for up to about `withinMillis` (the lease TTL: past it every
 * lease is lost anyway), then dies: the `ResourceLocks` operations have no error channel.
 */
const retryTransient = <A>(effect: Effect.Effect<A, SqlError.SqlError>, withinMillis: number): Effect.Effect<A> =>
  die(
    transientAsFailure(effect).pipe(
      Effect.retry({
        schedule: Schedule.spaced(reconnectDelay),
        times: Math.max(1, Math.ceil(withinMillis / Duration.toMillis(reconnectDelay))),
        while: isTransient
      })
    )
  )

const makeService = (table: LeaseTable, ttlMillis: number, pollMillis: number, state: State) => {
  const tryAcquire = (holder: ResourceLocks.Holder, request: Claims.Request, onGrant: (lease: Lease) => void) =>
    Effect.gen(function* () {
      const outcome = yield* transientAsFailure(table.tryInsert(holder, request))
      for (const stored of outcome.reclaimed) if (stored.owner !== table.owner) state.released(stored.lease)
      state.forget(outcome.held)
      if (outcome.granted._tag === "Blocked") {
        state.watch(outcome.held, table.owner, outcome.granted.blockers)
        return [{ _tag: "Blocked", blockers: outcome.granted.blockers } as const, outcome.blockedFor] as const
      }
      state.local.set(outcome.granted.lease.id, outcome.granted.lease)
      onGrant(outcome.granted.lease)
      return [outcome.granted, 0] as const
    }).pipe(Effect.uninterruptible)

  const release = (lease: Lease) =>
    Effect.suspend(() => {
      if (!state.local.delete(lease.id)) return Effect.void
      return table.remove(lease.id).pipe(
        Effect.asVoid,
        Effect.catch((error) =>
          Effect.andThen(
            Effect.sync(() => state.unreleased.add(lease.id)),
            warn(`releasing lease ${lease.id} failed; retrying with the next renewal`)(error)
          )
        ),
        Effect.ensuring(Effect.sync(() => state.released(lease)))
      )
    }).pipe(Effect.uninterruptible)

  /** Retries until granted; a connection error (the server restarting) is retried, not fatal to the waiter. */
  const waitFor = (holder: ResourceLocks.Holder, request: Claims.Request): Effect.Effect<Lease> =>
    Effect.suspend(() => {
      const waiter: Waiter = { holder, request }
      let granted: Lease | undefined
      const attempt: Effect.Effect<Lease> = Effect.suspend(() => {
        const signal = state.signal
        return tryAcquire(holder, request, (lease) => (granted = lease)).pipe(
          Effect.matchEffect({
            onSuccess: ([result, blockedFor]): Effect.Effect<Lease> =>
              result._tag === "Acquired"
                ? Effect.succeed(result.lease)
                : Effect.andThen(
                    Effect.raceFirst(
                      Deferred.await(signal),
                      Effect.sleep(Math.max(1, Math.min(pollMillis, blockedFor + 1)))
                    ),
                    attempt
                  ),
            onFailure: (error) =>
              isTransient(error)
                ? warn("a waiter's grant attempt failed; retrying")(error).pipe(
                    Effect.andThen(Effect.sleep(reconnectDelay)),
                    Effect.andThen(attempt)
                  )
                : Effect.die(error)
          })
        )
      })
      state.waiters.add(waiter)
      return attempt.pipe(
        Effect.ensuring(Effect.sync(() => state.waiters.delete(waiter))),
        Effect.onInterrupt(() => (granted === undefined ? Effect.void : release(granted)))
      )
    })

  return ResourceLocks.ResourceLocks.of({
    tryAcquire: (holder, request) =>
      Effect.map(
        retryTransient(
          tryAcquire(holder, request, () => {}),
          ttlMillis
        ),
        ([attempt]) => attempt
      ),
    acquire: (holder, request) => Effect.acquireRelease(waitFor(holder, request), release, { interruptible: true }),
    release,
    blockers: (request) =>
      Effect.map(retryTransient(table.live, ttlMillis), (held) => {
        state.forget(held)
        const blockers = LeaseConflicts.blockersOf(
          request,
          held.map((stored) => stored.lease)
        )
        state.watch(held, table.owner, blockers)
        return blockers
      }),
    snapshot: Effect.map(retryTransient(table.live, ttlMillis), (held) => ({
      held: held.flatMap((stored) => LeaseConflicts.heldClaims(stored.lease)),
      waiting: [...state.waiters]
    })),
    onRelease: (listener) =>
      Effect.asVoid(
        Effect.acquireRelease(
          Effect.sync(() => state.listeners.add(listener)),
          () => Effect.sync(() => state.listeners.delete(listener))
        )
      )
  })
}

const warn = (what: string) => (error: { readonly message: string }) =>
  Effect.logWarning(`corral: the Postgres lease table: ${what}`, error.message)

/**
 * Wakes waiters and listeners on every announced release, re-listening after a reconnect. Releases
 * announced while nothing listened are lost, so once listening every waiter tries again and the
 * watched leases are looked up. A failure is logged once, not at every attempt of an outage.
 */
const listenForReleases = (pg: PgClient.PgClient, table: LeaseTable, state: State) => {
  let failing = false
  return Effect.scoped(
    Effect.gen(function* () {
      const queue = yield* pg.listen(releasedChannel)
      state.wake()
      yield* pollWatched(table, state)
      failing = false
      return yield* Effect.forever(
        Effect.map(Queue.take(queue), (notification) => state.announced(Number(notification.payload)))
      )
    })
  ).pipe(
    Effect.catch((error) => {
      if (failing) return Effect.void
      failing = true
      return warn("LISTEN failed; re-listening")(error)
    }),
    Effect.andThen(Effect.sleep(reconnectDelay)),
    Effect.forever
  )
}

/** Leases of other owners that block someone here and vanished (expired, owner died) without an announcement. */
const pollWatched = (table: LeaseTable, state: State): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function* () {
    if (state.watched.size === 0 || (state.waiters.size === 0 && state.listeners.size === 0)) return
    const ids = [...state.watched.keys()]
    const present = yield* table.present(ids)
    for (const id of ids) {
      const lease = state.watched.get(id)
      if (lease !== undefined && !present.has(id)) state.released(lease)
    }
  })

/**
 * Deletes the leases whose release failed, then renews this owner's leases. A local lease whose row
 * is gone was reclaimed by a grant (it expired, or the owner's session was presumed dead); one whose
 * row is there is renewed even while the owner's session is being re-taken, and stays this
 * service's to release.
 */
const renew = (table: LeaseTable, state: State) =>
  Effect.gen(function* () {
    for (const id of [...state.unreleased]) {
      yield* table.remove(id)
      state.unreleased.delete(id)
    }
    if (state.local.size === 0) return
    const ids = [...state.local.keys()]
    const still = yield* table.renew(ids)
    for (const id of ids) {
      const lease = state.local.get(id)
      if (lease === undefined || still.has(id)) continue
      state.local.delete(id)
      yield* Effect.logWarning(
        `corral: lease ${id} of ${lease.holder.runId}/${lease.holder.agentId} was reclaimed (expired or owner presumed dead); its fencing token ${lease.fencingToken} is stale`
      )
    }
  })

const every = (interval: Duration.Input, what: string, effect: Effect.Effect<void, SqlError.SqlError>) =>
  Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(interval), Effect.catch(effect, warn(what)))))

/**
 * Builds the service over the `PgClient` in context: runs the lease table's migrations, registers
 * an owner and takes its session lock, and forks the renewal, `LISTEN` and polling fibers in the
 * current scope. Leases still held when the scope closes are released.
 *
 * @example
 * ```ts
 * import { Claims } from "@corral/core"
 * import { PostgresClient, PostgresLocks } from "@corral/postgres"
 * import { Effect, Result } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* PostgresLocks.make({ ttl: "30 seconds" })
 *   const request = Result.getOrThrow(Claims.normalize({ write: ["src/"] }, {}))
 *   const lease = yield* locks.acquire({ runId: "r1", agentId: "a" }, request) // released with the scope
 *   return lease.fencingToken
 * }).pipe(Effect.scoped, Effect.provide(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral")))
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<ResourceLocks.ResourceLocks["Service"], LocksError, PgClient.PgClient | Scope.Scope> =>
  Effect.gen(function* () {
    const timing = yield* LeaseTables.checkTiming("PostgresLocks", options, "500 millis")
    const pg = yield* PgClient.PgClient
    const sql: SqlClient.SqlClient = pg
    yield* migrate.pipe(Effect.provideService(SqlClient.SqlClient, sql))
    const renewEvery = timing.renewEvery
    const pollMillis = timing.pollEvery
    const owner = yield* registerOwner(sql, process.pid, hostname())
    const ttlMillis = timing.ttl
    const table = makeLeaseTable(sql, owner, ttlMillis)
    const state = new State()
    // `locked` records when the lock was taken, which tells a lost session from a server restart
    // (see `internal/leaseTable.ts`).
    yield* OwnerSession.hold({
      namespace: OwnerSession.namespaces.lockOwners,
      owner,
      every: renewEvery,
      onLocked: table.locked,
      lost: "corral: the Postgres lease table: the owner's session was lost; reconnecting"
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    yield* Effect.forkScoped(listenForReleases(pg, table, state))
    yield* every(renewEvery, "renewing leases failed", renew(table, state))
    yield* every(pollMillis, "polling leases failed", pollWatched(table, state))
    const service = makeService(table, ttlMillis, pollMillis, state)
    yield* Effect.addFinalizer(() =>
      Effect.forEach([...state.local.values()], service.release, { discard: true }).pipe(
        Effect.andThen(Effect.ignore(table.removeAll)),
        Effect.andThen(Effect.ignore(sql`DELETE FROM corral_lock_owners WHERE id = ${owner}`))
      )
    )
    return service
  }).pipe(PostgresClient.starting("PostgresLocks"))

/**
 * The lock service over the `PgClient` in context.
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { PostgresClient, PostgresLocks } from "@corral/postgres"
 * import { Layer } from "effect"
 *
 * // claims and run records over one pool
 * const services = Layer.mergeAll(PostgresLocks.layerClient(), RunLedger.layerSql()).pipe(
 *   Layer.provide(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral"))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerClient = (
  options: Options = {}
): Layer.Layer<ResourceLocks.ResourceLocks, LocksError, PgClient.PgClient> =>
  Layer.effect(ResourceLocks.ResourceLocks, make(options))

/**
 * The lock service over its own pool to `url`, shared by every process that opens the same database.
 *
 * @example
 * ```ts
 * import { Claims, ResourceLocks } from "@corral/core"
 * import { PostgresLocks } from "@corral/postgres"
 * import { Effect, Result } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* ResourceLocks.ResourceLocks
 *   const request = Result.getOrThrow(Claims.normalize({ write: ["src/"] }, {}))
 *   yield* locks.acquire({ runId: "r1", agentId: "a" }, request) // waits for every machine
 * }).pipe(Effect.scoped, Effect.provide(PostgresLocks.layer("postgres://postgres@127.0.0.1:5432/corral")))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  url: string,
  options: Options & PostgresClient.Options = {}
): Layer.Layer<ResourceLocks.ResourceLocks, LocksError | PostgresClient.PostgresUnavailable> =>
  layerClient(options).pipe(Layer.provide(PostgresClient.layer(url, options)))

/**
 * Whether `lease` is still held (unexpired, its owner alive, with the same fencing token), asked of
 * the database: a holder that was stopped or cut off checks it before a write that must not happen
 * twice.
 *
 * @example
 * ```ts
 * import { Claims, ResourceLocks } from "@corral/core"
 * import { PostgresClient, PostgresLocks } from "@corral/postgres"
 * import { Effect, Layer, Result } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* ResourceLocks.ResourceLocks
 *   const lease = yield* locks.acquire(
 *     { runId: "r1", agentId: "a" },
 *     Result.getOrThrow(Claims.normalize({ write: ["report.md"] }, {}))
 *   )
 *   yield* Effect.sleep("1 minute") // long work; this process may be stopped past the TTL meanwhile
 *   if (!(yield* PostgresLocks.isCurrent(lease))) return yield* Effect.interrupt // fenced
 *   yield* Effect.log(`writing report.md with fencing token ${lease.fencingToken}`)
 * }).pipe(
 *   Effect.scoped,
 *   Effect.provide(
 *     PostgresLocks.layerClient().pipe(Layer.provideMerge(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral")))
 *   )
 * )
 * ```
 * @since 0.1.0
 * @category fencing
 */
export const isCurrent = (lease: ResourceLocks.Lease): Effect.Effect<boolean, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => leaseIsCurrent(sql, lease.id, lease.fencingToken))
