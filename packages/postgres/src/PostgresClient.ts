/**
 * The Postgres connection pool every corral service on Postgres shares: `@effect/sql-pg`'s
 * `PgClient` (its own wire-protocol driver) with corral's defaults, and an error that names the
 * server (never its password) when it cannot be reached.
 *
 * @since 0.1.0
 */
import { SqlErrorMessage } from "@corral/platform-node"
import { PgClient } from "@effect/sql-pg"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Reactivity from "effect/reactivity/Reactivity"
import type * as Migrator from "effect/sql/Migrator"
import type * as SqlClient from "effect/sql/SqlClient"
import * as SqlError from "effect/sql/SqlError"
import * as PostgresOptions from "./PostgresOptions.ts"

/**
 * The URL is malformed or the server could not be reached.
 *
 * @since 0.1.0
 * @category errors
 */
export class PostgresUnavailable extends Data.TaggedError("PostgresUnavailable")<{
  /** The URL with its password replaced by `***`. */
  readonly url: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot connect to Postgres at ${this.url}: ${this.reason}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** A whole number of at least 1. @default 10 */
  readonly maxConnections?: number | undefined
  /** A positive duration. @default "5 seconds" */
  readonly connectTimeout?: PgClient.PgPoolConfig["connectTimeout"]
  /** `application_name` shown in `pg_stat_activity`. @default "corral" */
  readonly applicationName?: string | undefined
}

/**
 * `url` with its password replaced by `***`, for messages.
 *
 * @since 0.1.0
 * @category utils
 */
export const redact = (url: string): string => {
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "***"
    return parsed.toString()
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@")
  }
}

const check = (url: string): Effect.Effect<void, PostgresUnavailable> =>
  Effect.try({
    try: () => {
      const parsed = new URL(url)
      if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") throw new Error("expected postgres://")
    },
    catch: (error) =>
      new PostgresUnavailable({
        url: redact(url),
        reason: `not a postgres:// URL (${error instanceof Error ? error.message : String(error)})`
      })
  })

/**
 * A connected pool; fails with {@link PostgresUnavailable} when the URL is not a `postgres://` URL or
 * the first connection fails, and dies with `PostgresOptions.InvalidOption` for a `maxConnections`
 * or `connectTimeout` it cannot use (before connecting).
 *
 * @example
 * ```ts
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 * import { Reactivity } from "effect/reactivity"
 *
 * const program = Effect.gen(function*() {
 *   const sql = yield* PostgresClient.make("postgres://postgres@127.0.0.1:5432/corral")
 *   const rows = yield* sql<{ readonly version: string }>`SELECT version()`
 *   return rows[0]?.version
 * }).pipe(Effect.scoped, Effect.provide(Reactivity.layer))
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const make = (url: string, options: Options = {}) =>
  Effect.gen(function* () {
    yield* check(url)
    const maxConnections = yield* PostgresOptions.wholeNumber(
      "PostgresClient",
      "maxConnections",
      options.maxConnections ?? 10,
      1
    )
    const connectTimeout = yield* PostgresOptions.duration(
      "PostgresClient",
      "connectTimeout",
      options.connectTimeout ?? "5 seconds",
      true
    )
    const client = yield* PgClient.make({
      url: Redacted.make(url),
      maxConnections,
      connectTimeout,
      applicationName: options.applicationName ?? "corral"
    })
    yield* client`SELECT 1`
    return client
  }).pipe(
    Effect.mapError((error) =>
      error._tag === "PostgresUnavailable"
        ? error
        : new PostgresUnavailable({ url: redact(url), reason: withServerAnswer(error) })
    )
  )

/**
 * The driver's message with what lies under it: the driver says only "Failed to connect" or "Query
 * failed", while its reason's cause holds the server's answer (`database "x" does not exist`, `role
 * "y" does not exist`, `permission denied for schema public`) or the socket's (`connect ECONNREFUSED
 * …`). The one implementation is `@corral/platform-node`'s `SqlErrorMessage.withServerAnswer`.
 *
 * @example
 * ```ts
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 * import * as SqlClient from "effect/sql/SqlClient"
 *
 * const create = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE notes (text TEXT)`).pipe(
 *   Effect.mapError((error) => new Error(PostgresClient.withServerAnswer(error)))
 * ) // "PgConnection: Query failed (permission denied for schema public)"
 * ```
 * @since 0.1.0
 * @category utils
 */
export const withServerAnswer = SqlErrorMessage.withServerAnswer

/** The reason's class, rebuilt with another message (every `SqlErrorReason` has these three fields). */
type ReasonClass = new (fields: {
  readonly cause: unknown
  readonly message?: string | undefined
  readonly operation?: string | undefined
}) => SqlError.SqlErrorReason

const answered = (error: SqlError.SqlError): SqlError.SqlError => {
  const message = withServerAnswer(error)
  if (message === error.message) return error
  const Reason = error.reason.constructor as ReasonClass
  return new SqlError.SqlError({
    reason: new Reason({ cause: error.reason.cause, message, operation: error.reason.operation })
  })
}

/**
 * `effect` with each `SqlError` it fails with rebuilt so that its `message` says the server's answer
 * ({@link withServerAnswer}); it stays an `SqlError` of the same reason (`AuthorizationError`…), so
 * callers that catch `SqlError` are unchanged. Other failures pass unchanged.
 *
 * @example
 * ```ts
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 * import * as SqlClient from "effect/sql/SqlClient"
 *
 * // fails with SqlError: "PgConnection: Query failed (permission denied for schema public)"
 * const create = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE notes (text TEXT)`).pipe(
 *   PostgresClient.answering
 * )
 * ```
 * @since 0.1.0
 * @category errors
 */
export const answering = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapError(effect, (error) => (SqlError.isSqlError(error) ? (answered(error) as E) : error))

/**
 * A service could not create its tables or run its first queries: `reason` is the driver's message
 * with the server's answer (`PgConnection: Query failed (permission denied for schema public)`: the
 * role needs `CREATE` on that schema, or the tables created beforehand by a role that has it).
 *
 * @since 0.1.0
 * @category errors
 */
export class StartFailed extends Data.TaggedError("StartFailed")<{
  /** The service or layer, e.g. `PostgresLocks` or `Cluster.layerRunner`. */
  readonly module: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.module} could not start: ${this.reason}`
  }
}

/**
 * `cause` with its first `SqlError`/`MigrationError` (failure or defect) replaced by a
 * {@link StartFailed} failure; its interruptions are kept, so an interrupted start stays
 * interrupted. `undefined` when it holds neither error.
 */
const startFailure = (module: string, cause: Cause.Cause<unknown>): Cause.Cause<StartFailed> | undefined => {
  for (const reason of cause.reasons) {
    const error = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    if (SqlError.isSqlError(error) || Predicate.isTagged(error, "MigrationError")) {
      const failed = Cause.fail(new StartFailed({ module, reason: withServerAnswer(error as Migrator.MigrationError) }))
      const interrupts = cause.reasons.filter(Cause.isInterruptReason)
      return interrupts.length === 0 ? failed : Cause.fromReasons([...interrupts, ...failed.reasons])
    }
  }
  return undefined
}

/**
 * `effect`, the start of the service `module`, with an `SqlError` or a `MigrationError` it fails or
 * dies with replaced by {@link StartFailed} naming `module` and saying the server's answer (effect's
 * own message is only `Query failed`; for a failed migration, which one and its error's answer).
 * An interrupted start stays interrupted (its cause keeps the interruption beside `StartFailed`).
 * Other failures and defects pass unchanged.
 *
 * @example
 * ```ts
 * import { PostgresClient } from "@corral/postgres"
 * import { Effect } from "effect"
 * import * as SqlClient from "effect/sql/SqlClient"
 *
 * // fails with StartFailed: "Notes could not start: PgConnection: Query failed (permission denied for schema public)"
 * const start = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE notes (text TEXT)`).pipe(
 *   PostgresClient.starting("Notes")
 * )
 * ```
 * @since 0.1.0
 * @category errors
 */
export const starting =
  (module: string) =>
  <A, E, R>(
    effect: Effect.Effect<A, E, R>
  ): Effect.Effect<A, Exclude<E, SqlError.SqlError | Migrator.MigrationError> | StartFailed, R> =>
    Effect.catchCause(effect, (cause) => {
      const failed = startFailure(module, cause)
      return Effect.failCause(failed ?? (cause as Cause.Cause<never>))
    }) as Effect.Effect<A, Exclude<E, SqlError.SqlError | Migrator.MigrationError> | StartFailed, R>

/**
 * {@link starting} for a layer: building it fails with {@link StartFailed} naming `module` where it
 * failed or died with an `SqlError` or a `MigrationError`.
 *
 * @since 0.1.0
 * @category errors
 */
export const startingLayer =
  (module: string) =>
  <A, E, R>(
    layer: Layer.Layer<A, E, R>
  ): Layer.Layer<A, Exclude<E, SqlError.SqlError | Migrator.MigrationError> | StartFailed, R> =>
    Layer.catchCause(layer, (cause) => {
      const failed = startFailure(module, cause)
      return Layer.effectDiscard(Effect.failCause(failed ?? (cause as Cause.Cause<never>)))
    }) as Layer.Layer<A, Exclude<E, SqlError.SqlError | Migrator.MigrationError> | StartFailed, R>

/**
 * {@link make} as a layer of `PgClient` and `SqlClient`.
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { PostgresClient } from "@corral/postgres"
 * import { Layer } from "effect"
 *
 * // the run ledger over this pool (what `PostgresLedger.layer` does)
 * const ledger = RunLedger.layerSql().pipe(
 *   Layer.provide(PostgresClient.layer("postgres://postgres@127.0.0.1:5432/corral"))
 * )
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  url: string,
  options: Options = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PostgresUnavailable> =>
  PgClient.layerFrom(make(url, options)).pipe(Layer.provide(Reactivity.layer))
