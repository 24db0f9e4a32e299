/**
 * Execution leases: which runner may execute an agent now, with a fencing token.
 *
 * One row per agent in `corral_executions`, taken with one statement (`INSERT ... ON CONFLICT DO
 * UPDATE ... WHERE` the holder's lease expired or its owner's session is gone) and given back with one
 * (`DELETE ... RETURNING` whether it was still current). Takes and gives that arrive while one of
 * their statements runs go together in the next statement (group commit, `batched`), so a runner
 * starting or ending many agents at once sends far fewer than two statements per agent. `PostgresLocks` is not used for this: its
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
import { OwnerSession } from "@corral/postgres"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

/** The advisory-lock namespace of owners of execution leases (all of them are listed in `OwnerSession`). */
const ownerLockKey = OwnerSession.namespaces.executionOwners

const nowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT"

const ownerAlive = (column: string) => OwnerSession.heldSql(ownerLockKey, column)

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
  /** This service's owner number (`owner_id` of its leases, from the sequence `corral_executions_owner`). */
  readonly owner: number
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

/** The owner number of the runner's execution leases, which its registry row records (`lease_owner`). */
export class LeaseOwner extends Context.Service<LeaseOwner, number>()(
  "@corral/cluster/internal/executionLeases/LeaseOwner"
) {}

export interface Options {
  readonly ttl: Duration.Input
  readonly renewEvery: Duration.Input
  readonly retryEvery: Duration.Input
}

const warn = (what: string) => (error: { readonly message: string }) =>
  Effect.logWarning(`corral: execution leases: ${what}`, error.message)

interface Pending<I, O> {
  readonly input: I
  readonly done: Deferred.Deferred<O, SqlError.SqlError>
  /** Its caller was interrupted while it waited. */
  abandoned: boolean
  result?: O
}

/**
 * Group commit: each call waits for its result; calls made while a batch runs go together in the
 * next one (at most `maxBatch`), so a lone call costs no added latency and a burst of N costs about
 * one statement per running batch instead of N. `run` answers each input at its position. A call
 * interrupted while it waits still runs (its statement may be under way); `abandoned` gets the
 * result its caller never received.
 */
const batched = <I, O>(
  run: (inputs: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>, SqlError.SqlError>,
  abandoned: (output: O) => Effect.Effect<void> = () => Effect.void,
  maxBatch = 256
): Effect.Effect<(input: I) => Effect.Effect<O, SqlError.SqlError>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<Pending<I, O>>()
    const runBatch = (batch: ReadonlyArray<Pending<I, O>>) =>
      Effect.flatMap(Effect.exit(run(batch.map((pending) => pending.input))), (exit) => {
        const unclaimed: Array<O> = []
        batch.forEach((pending, i) => {
          if (Exit.isSuccess(exit)) {
            pending.result = exit.value[i] as O
            if (pending.abandoned) unclaimed.push(pending.result)
          }
          Deferred.doneUnsafe(
            pending.done,
            Exit.isSuccess(exit) ? Exit.succeed(exit.value[i] as O) : Exit.failCause(exit.cause)
          )
        })
        return Effect.forEach(unclaimed, abandoned, { discard: true })
      })
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.flatMap(Queue.takeAll(queue), (all) =>
          Effect.forEach(
            Array.from({ length: Math.ceil(all.length / maxBatch) }, (_, i) =>
              all.slice(i * maxBatch, (i + 1) * maxBatch)
            ),
            runBatch,
            { discard: true }
          )
        )
      )
    )
    return (input: I) =>
      Effect.suspend(() => {
        const pending: Pending<I, O> = { input, done: Deferred.makeUnsafe(), abandoned: false }
        Queue.offerUnsafe(queue, pending)
        return Effect.onInterrupt(Deferred.await(pending.done), () =>
          Effect.suspend(() => {
            pending.abandoned = true
            return "result" in pending ? abandoned(pending.result as O) : Effect.void
          })
        )
      })
  })

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
    yield* OwnerSession.hold({
      namespace: ownerLockKey,
      owner: ownerId,
      every: options.renewEvery,
      lost: "corral: execution leases: the owner's session was lost; reconnecting"
    })
    const held = new Set<number>()

    // Gives back the leases of one batch in one statement (a fencing token names one lease).
    const give = yield* batched((tokens: ReadonlyArray<number>) =>
      Effect.map(
        sql<{ fencing_token: string; current: boolean }>`DELETE FROM corral_executions
          WHERE fencing_token = ANY(${tokens}::bigint[])
          RETURNING fencing_token, expires_at > ${sql.literal(nowMs)} AS current`,
        (rows) => {
          const current = new Map(rows.map((row) => [Number(row.fencing_token), row.current === true]))
          return tokens.map((token) => current.get(token) === true)
        }
      )
    )

    // Takes of one batch are one statement; an entity twice in a batch is taken once (the other
    // take finds it held and retries), as one statement cannot update a row twice.
    const takeAll = (entities: ReadonlyArray<string>) => {
      const unique = [...new Set(entities)]
      return Effect.map(
        sql<{ entity: string; fencing_token: string }>`INSERT INTO corral_executions AS e
          (entity, owner_id, fencing_token, expires_at)
          SELECT x, ${ownerId}, nextval('corral_executions_fence'), ${sql.literal(nowMs)} + ${ttl}
          FROM unnest(${unique}::text[]) AS x
          ON CONFLICT (entity) DO UPDATE SET owner_id = EXCLUDED.owner_id, fencing_token = EXCLUDED.fencing_token,
            expires_at = EXCLUDED.expires_at
          WHERE e.expires_at <= ${sql.literal(nowMs)} OR NOT ${sql.literal(ownerAlive("e.owner_id"))}
          RETURNING entity, fencing_token`,
        (rows) => {
          const taken = new Map(rows.map((row) => [row.entity, Number(row.fencing_token)]))
          return entities.map((entity) => {
            const token = taken.get(entity)
            taken.delete(entity)
            return token
          })
        }
      )
    }
    // A take whose caller was interrupted gives its lease back at once, instead of leaving it to
    // lapse after the TTL (and block a resumed run's execution of the agent until then).
    const take = yield* batched(takeAll, (token) =>
      token === undefined
        ? Effect.void
        : Effect.asVoid(Effect.catch(give(token), warn("giving back an abandoned lease failed")))
    )

    // Interruptible only while it queries or waits: called uninterruptibly, a lease it returns
    // is always in the caller's hands, and one taken by an interrupted query is given back.
    const retry = (entity: string) =>
      Effect.andThen(
        Effect.interruptible(Effect.sleep(options.retryEvery)),
        Effect.suspend(() => acquire(entity))
      )
    const acquire = (entity: string): Effect.Effect<ExecutionLease> =>
      Effect.matchEffect(Effect.interruptible(take(entity)), {
        onFailure: (error) =>
          Effect.andThen(warn(`taking the lease of ${entity} failed; retrying`)(error), retry(entity)),
        onSuccess: (fencingToken) =>
          fencingToken === undefined
            ? retry(entity)
            : Effect.sync(() => {
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
      owner: ownerId,
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
          return give(lease.fencingToken)
        })
    } satisfies ExecutionLeases
  })
