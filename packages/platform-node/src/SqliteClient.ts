/**
 * A `SqlClient` for SQLite over Node's built-in `node:sqlite` (`DatabaseSync`), for effect 4.1,
 * where no published `@effect/sql-sqlite-node` works.
 *
 * One connection is shared through a `Semaphore(1)`: a statement holds it while it runs, a
 * transaction (`BEGIN IMMEDIATE`) holds it until `COMMIT`/`ROLLBACK`, and nested transactions use
 * savepoints. File databases use WAL with `busy_timeout`, so several processes can write to the
 * same file. Effect's `Migrator` works with this client: pending migrations run in one
 * `BEGIN IMMEDIATE` transaction, so a second process waits and then finds nothing to do.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Migrator, SqlClient } from "effect/sql"
 * import * as SqliteClient from "@corral/platform-node/SqliteClient"
 *
 * const migrate = Migrator.make({})({
 *   loader: Migrator.fromRecord({
 *     "1_create_runs": Effect.flatMap(SqlClient.SqlClient, (sql) =>
 *       sql`CREATE TABLE runs (id INTEGER PRIMARY KEY, agent TEXT NOT NULL)`)
 *   })
 * }) // Effect<ReadonlyArray<[id, name]>>: the migrations that ran
 *
 * migrate.pipe(Effect.provide(SqliteClient.layer({ filename: ".corral/state.db" })))
 * ```
 *
 * @since 0.1.0
 */
import { DatabaseSync } from "node:sqlite"
import * as DurationOption from "@corral/core/DurationOption"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as Statement from "effect/sql/Statement"
import { makeConnection, type SqliteConnection } from "./internal/sqliteConnection.ts"
import { toOpenError } from "./internal/sqliteError.ts"

/**
 * The SQLite client: a full `SqlClient` plus SQLite-only operations.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteClient extends SqlClient.SqlClient {
  readonly config: SqliteClientConfig
  /**
   * Runs a script of one or more `;`-separated statements without parameters, e.g. DDL in a
   * migration. Joins the current transaction when there is one.
   */
  readonly executeScript: (sql: string) => Effect.Effect<void, SqlError.SqlError>
}

/**
 * Service key for the {@link SqliteClient}. {@link layer} provides it together with `SqlClient`.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const schema = Effect.flatMap(SqliteClient.SqliteClient, (sqlite) =>
 *   sqlite.executeScript("CREATE TABLE a (x INTEGER); CREATE INDEX a_x ON a (x);"))
 * ```
 *
 * @since 0.1.0
 * @category services
 */
export const SqliteClient: Context.Service<SqliteClient, SqliteClient> = Context.Service<SqliteClient>(
  "@corral/platform-node/SqliteClient"
)

/**
 * @since 0.1.0
 * @category models
 */
export interface SqliteClientConfig {
  /** Path of the database file, or `":memory:"` for a private in-memory database. */
  readonly filename: string
  /**
   * Open the database read-only. The file must exist, and the journal mode is left as it is.
   * @default false
   */
  readonly readonly?: boolean | undefined
  /**
   * How long a statement waits for another process's lock before failing with a `LockTimeoutError`.
   * The wait blocks the Node event loop (`node:sqlite` is synchronous). At most 2147483647 ms
   * (about 24.8 days, `node:sqlite`'s limit); a longer one, `Infinity`, or one `DurationOption.millis`
   * refuses fails opening with a `SqlError` naming the option.
   * @default "5 seconds"
   */
  readonly busyTimeout?: Duration.Input | undefined
  /**
   * How many prepared statements to keep, keyed by their SQL text. `0` prepares every time.
   * @default 200
   */
  readonly statementCacheSize?: number | undefined
  /** Extra attributes for every statement span. */
  readonly spanAttributes?: Record<string, unknown> | undefined
  /** Renames result columns, e.g. `snake_case` to `camelCase`. */
  readonly transformResultNames?: ((name: string) => string) | undefined
  /** Renames identifiers in queries, e.g. `camelCase` to `snake_case`. */
  readonly transformQueryNames?: ((name: string) => string) | undefined
}

const isMemory = (filename: string): boolean =>
  filename === ":memory:" ||
  filename === "" ||
  filename.startsWith("file::memory:") ||
  /[?&]mode=memory\b/.test(filename)

const pragmas = (config: SqliteClientConfig, busyTimeoutMillis: number): ReadonlyArray<string> => [
  `PRAGMA busy_timeout = ${busyTimeoutMillis}`,
  ...(config.readonly === true || isMemory(config.filename) ? [] : ["PRAGMA journal_mode = WAL"]),
  "PRAGMA synchronous = NORMAL",
  "PRAGMA foreign_keys = ON"
]

/** SQLite's longest busy timeout: `node:sqlite` takes a 32-bit whole number of milliseconds. */
const maxBusyTimeout = 2_147_483_647

/** `busyTimeout` in whole milliseconds; throws naming the option when it is one SQLite cannot wait. */
const busyTimeoutOf = (config: SqliteClientConfig): number => {
  const busyTimeout = DurationOption.millis(config.busyTimeout ?? 5000)
  if (Result.isFailure(busyTimeout)) throw new Error(`busyTimeout: ${busyTimeout.failure}`)
  const ms = Math.round(busyTimeout.success)
  if (ms > maxBusyTimeout)
    throw new Error(`busyTimeout: must be at most ${maxBusyTimeout} ms (what SQLite can wait), got ${ms} ms`)
  return ms
}

const open = (config: SqliteClientConfig): Effect.Effect<DatabaseSync, SqlError.SqlError> =>
  Effect.try({
    try: () => {
      const busyTimeoutMillis = busyTimeoutOf(config)
      const db = new DatabaseSync(config.filename, {
        readOnly: config.readonly === true,
        timeout: busyTimeoutMillis,
        enableForeignKeyConstraints: true
      })
      try {
        for (const pragma of pragmas(config, busyTimeoutMillis)) db.prepare(pragma).all()
      } catch (cause) {
        db.close()
        throw cause
      }
      return db
    },
    catch: (cause) => toOpenError(cause, config.filename)
  }).pipe(
    Effect.retry({
      schedule: Schedule.spaced("25 millis"),
      times: 200,
      while: (error) => error.reason._tag === "LockTimeoutError"
    })
  )

/**
 * Opens the database in the current scope (it is closed when the scope closes) and builds the
 * client. Prefer {@link layer}; use `make` to hold a client with a shorter lifetime.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@corral/platform-node"
 * import { Effect } from "effect"
 * import { Reactivity } from "effect/reactivity"
 *
 * const count = Effect.scoped(
 *   Effect.flatMap(SqliteClient.make({ filename: ":memory:" }), (sql) => sql`SELECT 1 AS one`)
 * ).pipe(Effect.provide(Reactivity.layer))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  config: SqliteClientConfig
): Effect.Effect<SqliteClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function* () {
    const db = yield* Effect.acquireRelease(open(config), (db) =>
      Effect.sync(() => {
        if (db.isOpen) db.close()
      })
    )
    const connection = makeConnection(db, { cacheSize: config.statementCacheSize ?? 200 })
    const acquirers = SqlClient.makeSqliteAcquirers<SqliteConnection>({
      connection: Effect.succeed(connection),
      semaphore: yield* Semaphore.make(1),
      isTransaction: (conn) => conn.isTransaction()
    })
    const client = yield* SqlClient.make({
      ...acquirers,
      driver: "sqlite-node",
      compiler: Statement.makeCompilerSqlite(config.transformQueryNames),
      transformRows:
        config.transformResultNames === undefined
          ? undefined
          : Statement.defaultTransforms(config.transformResultNames).array,
      spanAttributes: [["db.system.name", "sqlite"], ...Object.entries(config.spanAttributes ?? {})],
      prepareTransactionControls: true,
      beginTransaction: "BEGIN IMMEDIATE",
      commit: "COMMIT",
      rollback: "ROLLBACK",
      savepoint: (name) => `SAVEPOINT ${name}`,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      rollbackSavepoint: (name) => `ROLLBACK TO SAVEPOINT ${name}`
    })
    const executeScript = (sql: string): Effect.Effect<void, SqlError.SqlError> =>
      Effect.flatMap(
        Effect.serviceOption(client.transactionService),
        Option.match({
          onNone: () => acquirers.borrower(() => connection.executeScript(sql)),
          onSome: () => connection.executeScript(sql)
        })
      )
    return Object.assign(client, { config, executeScript })
  })

/**
 * A layer that opens the database, provides it as both `SqliteClient` and `SqlClient`, and closes
 * it when the layer is released. Pragmas applied at open: `busy_timeout`, `journal_mode = WAL`
 * (file databases that are not read-only), `synchronous = NORMAL`, `foreign_keys = ON`. A missing
 * file is created, a missing folder is not: opening fails with a `ConnectionError` naming the file
 * and the folder.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { SqlClient } from "effect/sql"
 * import * as SqliteClient from "@corral/platform-node/SqliteClient"
 *
 * const program = Effect.gen(function*() {
 *   const sql = yield* SqlClient.SqlClient
 *   yield* sql`CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, agent TEXT NOT NULL)`
 *   yield* sql.withTransaction(sql`INSERT INTO runs ${sql.insert({ agent: "a" })}`)
 *   return yield* sql<{ id: number; agent: string }>`SELECT * FROM runs`
 * })
 *
 * program.pipe(Effect.provide(SqliteClient.layer({ filename: ".corral/state.db" })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqliteClient | SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effectContext(
    Effect.map(make(config), (client) =>
      Context.make(SqliteClient, client).pipe(Context.add(SqlClient.SqlClient, client))
    )
  ).pipe(Layer.provide(Reactivity.layer))
