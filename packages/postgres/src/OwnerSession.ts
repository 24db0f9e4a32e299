/**
 * An owner's session advisory lock, held on one dedicated connection while a scope lasts: how a
 * service tells a live owner from one whose process died (its connection closed and the lock went
 * with it) without waiting for a TTL. `PostgresLocks`, `PostgresLiveness` and `@corral/cluster`'s
 * execution leases hold their owners' locks with it.
 *
 * Advisory-lock namespaces (the first key of the two-key form) share one key space per database, so
 * each kind of owner has its own; all of corral's are listed in {@link namespaces}, and a new one is
 * added there:
 * - `0x636f7200` lease grants of `PostgresLocks` (transaction-scoped, serializes grants)
 * - `0x636f7201` lock owners of `PostgresLocks`
 * - `0x636f7202` run coordinators of `PostgresLiveness`
 * - `0x636f7203` lineages of `PostgresLiveness` (transaction-scoped, serializes registrations)
 * - `0x636f7204` owners of execution leases in `@corral/cluster`
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as PostgresOptions from "./PostgresOptions.ts"

/**
 * The advisory-lock namespaces corral uses; reusing one makes unrelated owners block each other.
 *
 * @since 0.1.0
 * @category constants
 */
export const namespaces = {
  leaseGrants: 0x636f7200,
  lockOwners: 0x636f7201,
  coordinators: 0x636f7202,
  lineages: 0x636f7203,
  executionOwners: 0x636f7204
} as const

/**
 * A SQL condition: the owner whose id is in `column` holds its session lock in `namespace` in this
 * database.
 *
 * @example
 * ```ts
 * import { OwnerSession } from "@corral/postgres"
 *
 * const alive = OwnerSession.heldSql(OwnerSession.namespaces.executionOwners, "e.owner_id")
 * // `... WHERE NOT ${alive}` selects rows whose owner's session is gone
 * ```
 * @since 0.1.0
 * @category sql
 */
export const heldSql = (namespace: number, column: string): string =>
  `EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted
  AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND p.classid = ${namespace}::oid AND p.objid = ${column}::oid AND p.objsubid = 2)`

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The lock's namespace, one of {@link namespaces}. */
  readonly namespace: number
  /** The owner's id, the second key. */
  readonly owner: number
  /**
   * How often the connection is used (`heartbeat`), which notices a lost session: above 0 and
   * finite, else `hold` dies with `PostgresOptions.InvalidOption` before taking the lock.
   */
  readonly every: Duration.Input
  /** A statement run on the lock's connection at once and then every `every`, with `$1` the owner id. @default "SELECT 1" */
  readonly heartbeat?: string | undefined
  /** The heartbeat's parameters after the owner id: `$2`, `$3`, … */
  readonly heartbeatParams?: ReadonlyArray<string | number> | undefined
  /** Runs after each time the lock is taken (also after a reconnect), before `hold` returns the first time. */
  readonly onLocked?: Effect.Effect<void, SqlError.SqlError> | undefined
  /** The warning logged when the session is lost, before taking the lock again. */
  readonly lost: string
}

const reconnectDelay = "200 millis"

const holdOnce = (sql: SqlClient.SqlClient, options: Options, held: Deferred.Deferred<void>, locked: () => void) =>
  Effect.scoped(
    Effect.gen(function* () {
      const connection = yield* sql.reserve
      const keys = [options.namespace, options.owner]
      yield* Effect.acquireRelease(connection.execute("SELECT pg_advisory_lock($1, $2)", keys, undefined), () =>
        Effect.ignore(connection.execute("SELECT pg_advisory_unlock($1, $2)", keys, undefined))
      )
      if (options.onLocked !== undefined) yield* options.onLocked
      locked()
      yield* Deferred.succeed(held, undefined)
      const heartbeat = connection.execute(
        options.heartbeat ?? "SELECT 1",
        options.heartbeat === undefined ? [] : [options.owner, ...(options.heartbeatParams ?? [])],
        undefined
      )
      return yield* Effect.forever(Effect.andThen(heartbeat, Effect.sleep(options.every)))
    })
  )

/**
 * Takes the owner's session lock on a dedicated connection and keeps it in a fiber of the current
 * scope, taking it again after the session is lost (the server restarted, the connection broke),
 * every 200 ms, with one warning (`lost`) per loss; returns once the lock is first held. Closing
 * the scope unlocks it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const hold = (options: Options): Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const every = yield* PostgresOptions.duration("OwnerSession", "every", options.every, true)
    const sql = yield* SqlClient.SqlClient
    const held = Deferred.makeUnsafe<void>()
    // warned once per loss, not at every reconnect attempt while the server is away
    let lost = false
    yield* Effect.forkScoped(
      holdOnce(sql, { ...options, every }, held, () => (lost = false)).pipe(
        Effect.catch((error) => {
          if (lost) return Effect.void
          lost = true
          return Effect.logWarning(options.lost, error.message)
        }),
        Effect.andThen(Effect.sleep(reconnectDelay)),
        Effect.forever
      )
    )
    yield* Deferred.await(held)
  })
