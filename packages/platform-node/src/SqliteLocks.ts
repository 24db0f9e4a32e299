/**
 * Resource claims shared by every process that opens the same database: a `ResourceLocks`
 * implementation over a SQLite lease table.
 *
 * A grant checks conflicts against unexpired leases and inserts the lease with the next fencing
 * token in one `BEGIN IMMEDIATE` transaction. A background fiber renews this process's leases
 * every `renewEvery`. A lease whose process is known dead — a process on this host (same
 * `hostname`) whose pid no longer exists — is removed at once: when any process opens the lease
 * table, and on each poll while a lease of another process blocks someone here. A lease of a process
 * on another host (or whose pid was reused) expires `ttl` after its last renewal. Fencing tokens
 * come from a counter that removals never lower. Releases in this process notify `onRelease`
 * listeners and waiters at once; releases, removals and expiries in other processes are noticed by
 * polling every `pollEvery`, only while a lease of another process blocks someone here.
 *
 * Fairness between processes: a request turned away is queued in the `lease_waiters` table (renewed
 * and removed like leases). Each grant to one process counts one bypass for every conflicting waiter
 * of another process queued before it; after `maxBypass` bypasses the waiter's keys are reserved:
 * requests of other processes that conflict with them and were not queued before it are turned
 * away (the blocker names the waiter, `… (reserved: waiting longest)`) until it is granted. A
 * reservation not taken within `max(2 s, 20 × pollEvery)` of first turning someone away is dropped
 * (its waiter gave up: cancelled, timed out). Within one process, `Corral.run` keeps its own order.
 *
 * @since 0.1.0
 */
import { hostname } from "node:os"
import type * as Claims from "@corral/core/Claims"
import * as ResourceLocks from "@corral/core/ResourceLocks"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import { blockersOf, heldClaims } from "./internal/sqliteLocksConflict.ts"
import {
  type Fairness,
  type LeaseTable,
  makeLeaseTable,
  migrate,
  RESERVATION_ID_BASE,
  type StoredLease
} from "./internal/sqliteLocksTable.ts"
import * as LeaseTables from "./LeaseTables.ts"
import * as SqliteClient from "./SqliteClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends LeaseTables.TimingOptions {
  /** How often releases by other processes are looked for while they block someone. @default "100 millis" */
  readonly pollEvery?: Duration.Input | undefined
  /**
   * Fairness between processes: a waiter of one process is overtaken by at most this many grants to
   * other processes whose claims conflict with its own; then its keys are reserved for it (as
   * `Corral.run`'s `maxBypass` does within a process). @default 32
   */
  readonly maxBypass?: number | undefined
}

/**
 * Opening the database, migrating the lease table or writing to it (a file this process may only read) failed.
 *
 * @since 0.1.0
 * @category errors
 */
export type LocksError = LeaseTables.LocksError

interface Waiter {
  readonly holder: ResourceLocks.Holder
  readonly request: Claims.Request
}

type Lease = ResourceLocks.Lease

const die = <A>(effect: Effect.Effect<A, SqlError.SqlError>): Effect.Effect<A> => Effect.orDie(effect)

/**
 * A statement that changes nothing but needs write access: a file this process may only read (another
 * user's, or opened `readonly`) fails the start with the `SqlError` saying so (`attempt to write a
 * readonly database`), not the first claim with a defect.
 */
const writable = (sql: SqlClient.SqlClient) => sql`DELETE FROM leases WHERE 0`

class State {
  readonly local = new Map<number, Lease>()
  readonly watched = new Map<number, Lease>()
  readonly waiters = new Set<Waiter>()
  readonly listeners = new Set<(lease: Lease) => void>()
  signal = Deferred.makeUnsafe<void>()
  /** Completed when `watch` finds a lease to watch: the poll fiber waits for it while there is none. */
  private watching = Deferred.makeUnsafe<void>()

  /** Waits until a lease of another process is watched. */
  readonly untilWatched: Effect.Effect<void> = Effect.suspend(() => {
    if (this.watched.size > 0) return Effect.void
    this.watching = Deferred.makeUnsafe<void>()
    return Deferred.await(this.watching)
  })

  released(lease: Lease): void {
    this.watched.delete(lease.id)
    for (const listener of this.listeners) listener(lease)
    const signal = this.signal
    this.signal = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(signal, Effect.void)
  }

  /** Watched leases (and reservations) that are gone from `held` were released by their process. */
  forget(held: ReadonlyArray<StoredLease>, reservations?: ReadonlyArray<StoredLease>): void {
    if (this.watched.size === 0) return
    const present = new Set(held.map((stored) => stored.lease.id))
    for (const stored of reservations ?? []) present.add(stored.lease.id)
    for (const lease of [...this.watched.values()]) {
      if (lease.id >= RESERVATION_ID_BASE && reservations === undefined) continue
      if (!present.has(lease.id)) this.released(lease)
    }
  }

  watch(held: ReadonlyArray<StoredLease>, owner: string, blockers: ReadonlyArray<ResourceLocks.Blocker>): void {
    const ids = new Set(blockers.flatMap((b) => (b._tag === "Key" ? [b.leaseId] : b.leaseIds)))
    for (const stored of held) {
      if (stored.owner !== owner && ids.has(stored.lease.id)) this.watched.set(stored.lease.id, stored.lease)
    }
    if (this.watched.size > 0) Deferred.doneUnsafe(this.watching, Effect.void)
  }
}

const blockersOfHeld = (request: Claims.Request, held: ReadonlyArray<StoredLease>) =>
  blockersOf(
    request,
    held.map((stored) => stored.lease)
  )

const makeService = (
  table: LeaseTable,
  owner: string,
  ttlMillis: number,
  pollEvery: Duration.Input,
  fairness: Fairness,
  state: State
) => {
  const fallback = Duration.times(Duration.fromInputUnsafe(pollEvery), 10)
  const tryAcquire = (holder: ResourceLocks.Holder, request: Claims.Request, onGrant: (lease: Lease) => void) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const { granted, expired, held, reservations } = yield* die(
        table.tryInsert(holder, request, now, now + ttlMillis, fairness)
      )
      for (const stored of expired) if (stored.owner !== owner) state.released(stored.lease)
      state.forget(held, reservations)
      if (granted._tag === "Blocked") {
        state.watch([...held, ...reservations], owner, granted.blockers)
        return { _tag: "Blocked", blockers: granted.blockers } as const
      }
      state.local.set(granted.lease.id, granted.lease)
      onGrant(granted.lease)
      return granted
    }).pipe(Effect.uninterruptible)

  const release = (lease: Lease) =>
    Effect.suspend(() => {
      if (!state.local.delete(lease.id)) return Effect.void
      return Effect.ensuring(
        die(table.remove(lease.id)),
        Effect.sync(() => state.released(lease))
      )
    }).pipe(Effect.uninterruptible)

  const waitFor = (holder: ResourceLocks.Holder, request: Claims.Request): Effect.Effect<Lease> =>
    Effect.suspend(() => {
      const waiter: Waiter = { holder, request }
      let granted: Lease | undefined
      const attempt: Effect.Effect<Lease> = Effect.suspend(() => {
        const signal = state.signal
        return Effect.flatMap(
          tryAcquire(holder, request, (lease) => (granted = lease)),
          (result): Effect.Effect<Lease> =>
            result._tag === "Acquired"
              ? Effect.succeed(result.lease)
              : Effect.andThen(Effect.raceFirst(Deferred.await(signal), Effect.sleep(fallback)), attempt)
        )
      })
      state.waiters.add(waiter)
      return attempt.pipe(
        Effect.ensuring(Effect.sync(() => state.waiters.delete(waiter))),
        Effect.onInterrupt(() => (granted === undefined ? Effect.void : release(granted)))
      )
    })

  const live = Effect.flatMap(Clock.currentTimeMillis, (now) => die(table.live(now)))

  return ResourceLocks.ResourceLocks.of({
    tryAcquire: (holder, request) => tryAcquire(holder, request, () => {}),
    acquire: (holder, request) => Effect.acquireRelease(waitFor(holder, request), release, { interruptible: true }),
    release,
    blockers: (request) =>
      Effect.map(live, (held) => {
        state.forget(held)
        const blockers = blockersOfHeld(request, held)
        state.watch(held, owner, blockers)
        return blockers
      }),
    snapshot: Effect.map(live, (held) => ({
      held: held.flatMap((stored) => heldClaims(stored.lease)),
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

/** Whether no process with this pid exists on this host (EPERM: it exists, owned by someone else). */
const isDeadPid = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
}

const removeDead = (table: LeaseTable, state: State) =>
  Effect.map(table.removeDead(isDeadPid), (removed) => {
    for (const stored of removed) state.released(stored.lease)
  })

const poll = (table: LeaseTable, state: State) =>
  Effect.gen(function* () {
    if (state.watched.size === 0 || (state.waiters.size === 0 && state.listeners.size === 0)) return
    yield* removeDead(table, state)
    const now = yield* Clock.currentTimeMillis
    const present = yield* table.present([...state.watched.keys()], now)
    for (const [id, lease] of [...state.watched]) if (!present.has(id)) state.released(lease)
  })

const renew = (table: LeaseTable, state: State, ttlMillis: number) =>
  Effect.gen(function* () {
    if (state.local.size === 0) return
    const now = yield* Clock.currentTimeMillis
    yield* table.renew(now + ttlMillis)
  })

const every = (
  interval: Duration.Input,
  effect: Effect.Effect<void, SqlError.SqlError>,
  until: Effect.Effect<void> = Effect.void
) =>
  Effect.forkScoped(
    Effect.forever(
      Effect.andThen(
        Effect.andThen(until, Effect.sleep(interval)),
        Effect.catch(effect, (error) =>
          Effect.logWarning("corral: the lease table could not be read or renewed", error.message)
        )
      )
    )
  )

/**
 * Builds the service over the `SqlClient` in context (running the lease table's migrations) with
 * its renewal and polling fibers in the current scope. Leases still held when the scope closes are
 * released.
 *
 * @example
 * ```ts
 * import { SqliteLocks } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* SqliteLocks.make({ ttl: "30 seconds" })
 *   return locks
 * })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<ResourceLocks.ResourceLocks["Service"], LocksError, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const timing = yield* LeaseTables.checkTiming("SqliteLocks", options, "100 millis")
    const sql = yield* SqlClient.SqlClient
    yield* migrate
    yield* writable(sql)
    const owner = { id: crypto.randomUUID(), pid: process.pid, hostname: hostname() }
    const table = makeLeaseTable(sql, owner)
    const ttlMillis = timing.ttl
    const state = new State()
    yield* removeDead(table, state)
    yield* every(timing.renewEvery, renew(table, state, ttlMillis))
    // While no lease of another process is watched, a poll would find nothing to do: the fiber waits
    // instead of waking every `pollEvery` (10 times a second by default) for the whole run.
    yield* every(timing.pollEvery, poll(table, state), state.untilWatched)
    const pollEvery = timing.pollEvery
    const fairness: Fairness = {
      maxBypass: options.maxBypass ?? 32,
      graceMillis: Math.max(2000, 20 * pollEvery)
    }
    const service = makeService(table, owner.id, ttlMillis, pollEvery, fairness, state)
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Effect.forEach([...state.local.values()], service.release, { discard: true }),
        Effect.ignore(table.removeWaiters)
      )
    )
    return service
  })

/**
 * The lock service over the `SqlClient` in context.
 *
 * @example
 * ```ts
 * import { SqliteClient, SqliteLocks } from "@corral/platform-node"
 * import { Layer } from "effect"
 *
 * SqliteLocks.layerSql().pipe(Layer.provide(SqliteClient.layer({ filename: ".corral/locks.db" })))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layerSql = (
  options: Options = {}
): Layer.Layer<ResourceLocks.ResourceLocks, LocksError, SqlClient.SqlClient> =>
  Layer.effect(ResourceLocks.ResourceLocks, make(options))

/**
 * The lock service in a SQLite file (WAL) shared by every process that opens it.
 *
 * @example
 * ```ts
 * import { Claims, ResourceLocks } from "@corral/core"
 * import { SqliteLocks } from "@corral/platform-node"
 * import { Effect, Result } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const locks = yield* ResourceLocks.ResourceLocks
 *   const request = Result.getOrThrow(Claims.normalize({ write: ["src/"] }, {}))
 *   yield* locks.acquire({ runId: "r1", agentId: "a" }, request) // waits for other processes too
 * }).pipe(Effect.scoped, Effect.provide(SqliteLocks.layer(".corral/locks.db", { ttl: "30 seconds", renewEvery: "10 seconds" })))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (filename: string, options: Options = {}): Layer.Layer<ResourceLocks.ResourceLocks, LocksError> =>
  Layer.effect(
    ResourceLocks.ResourceLocks,
    Effect.flatMap(SqliteClient.make({ filename }), (sql) =>
      Effect.provideService(make(options), SqlClient.SqlClient, sql)
    ).pipe(Effect.provide(Reactivity.layer))
  )
