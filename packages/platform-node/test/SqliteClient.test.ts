import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, assert, describe, it, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Scope, String as Str } from "effect"
import { Migrator, SqlClient, SqlError } from "effect/sql"
import * as SqliteClient from "../src/SqliteClient.ts"
import { sqlClientContract } from "./contracts/SqlClientContract.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-sqlite-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => join(dir, `db-${files++}.sqlite`)

sqlClientContract("SqliteClient (file)", SqliteClient.layer({ filename: freshFile() }))
sqlClientContract("SqliteClient (:memory:)", SqliteClient.layer({ filename: ":memory:" }))
sqlClientContract(
  "SqliteClient (no statement cache)",
  SqliteClient.layer({ filename: ":memory:", statementCacheSize: 0 })
)

const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.flip(effect), (error) => {
    assert.isTrue(SqlError.isSqlError(error), `expected a SqlError, got ${String(error)}`)
    return error as SqlError.SqlError
  })

const pragma = (sql: SqlClient.SqlClient, name: string) =>
  Effect.map(sql.unsafe<Record<string, unknown>>(`PRAGMA ${name}`), (rows) => rows[0]?.[name])

describe("SqliteClient", () => {
  layer(SqliteClient.layer({ filename: freshFile() }))("a file database", (it) => {
    it.effect("applies WAL, synchronous, busy_timeout and foreign_keys pragmas", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        assert.strictEqual(yield* pragma(sql, "journal_mode"), "wal")
        assert.strictEqual(yield* pragma(sql, "synchronous"), 1)
        assert.strictEqual(yield* pragma(sql, "foreign_keys"), 1)
        const [timeout] = yield* sql.unsafe<{ timeout: number }>("PRAGMA busy_timeout")
        assert.strictEqual(timeout!.timeout, 5000)
      })
    )

    it.effect("provides SqliteClient and SqlClient as the same client", () =>
      Effect.gen(function* () {
        const sqlite = yield* SqliteClient.SqliteClient
        assert.strictEqual(sqlite, yield* SqlClient.SqlClient)
        assert.strictEqual(sqlite.driver, "sqlite-node")
        assert.strictEqual(sqlite.onDialectOrElse({ sqlite: () => "sqlite", orElse: () => "other" }), "sqlite")
      })
    )

    it.effect("serializes read-modify-write transactions without lost updates", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE counter_rmw (seq INTEGER PRIMARY KEY)`
        const next = sql.withTransaction(
          Effect.gen(function* () {
            const [row] = yield* sql<{ last: number | null }>`SELECT MAX(seq) AS last FROM counter_rmw`
            yield* Effect.yieldNow
            yield* sql`INSERT INTO counter_rmw ${sql.insert({ seq: (row!.last ?? 0) + 1 })}`
          })
        )
        yield* Effect.all(
          Array.from({ length: 50 }, () => next),
          { concurrency: "unbounded", discard: true }
        )
        const rows = yield* sql<{ seq: number }>`SELECT seq FROM counter_rmw ORDER BY seq`
        assert.deepStrictEqual(
          rows.map((r) => r.seq),
          Array.from({ length: 50 }, (_, i) => i + 1)
        )
      })
    )

    it.effect("puts the SQLite message and the statement in the error", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const error = yield* failure(sql`SELECT * FROM missing_table WHERE id = ${1}`)
        assert.strictEqual(error.reason._tag, "UnknownError")
        assert.strictEqual(
          error.message,
          "no such table: missing_table, in statement: SELECT * FROM missing_table WHERE id = ?"
        )
        assert.strictEqual(error.reason.operation, "execute")
      })
    )

    it.effect("classifies constraint errors", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE parent_fk (id INTEGER PRIMARY KEY)`
        yield* sql`CREATE TABLE child_fk (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent_fk(id))`
        const fk = yield* failure(sql`INSERT INTO child_fk ${sql.insert({ id: 1, parent: 99 })}`)
        assert.strictEqual(fk.reason._tag, "ConstraintError")
        assert.match(fk.message, /^FOREIGN KEY constraint failed/)
        const notNull = yield* failure(sql`INSERT INTO child_fk ${sql.insert({ id: 2, parent: null })}`)
        assert.strictEqual(notNull.reason._tag, "ConstraintError")
        yield* sql`INSERT INTO parent_fk ${sql.insert({ id: 1 })}`
        const pk = yield* failure(sql`INSERT INTO parent_fk ${sql.insert({ id: 1 })}`)
        assert.strictEqual(pk.reason._tag, "UniqueViolation")
        assert.strictEqual((pk.reason as SqlError.UniqueViolation).constraint, "parent_fk.id")
      })
    )

    it.effect("binds booleans, dates and undefined", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const at = new Date("2030-01-02T03:04:05.678Z")
        const [row] = yield* sql<{ t: number; f: number; d: string; u: null }>`
          SELECT ${true} AS t, ${false} AS f, ${at} AS d, ${undefined} AS u`
        assert.deepStrictEqual(row, { t: 1, f: 0, d: at.toISOString(), u: null })
      })
    )

    it.effect("reads integers beyond 2^53 only with SafeIntegers", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const query = sql<{ x: unknown; y: unknown }>`SELECT 9007199254740993 AS x, 1 AS y`
        const [big] = yield* query.pipe(Effect.provideService(SqlClient.SafeIntegers, true))
        assert.deepStrictEqual(big, { x: 9007199254740993n, y: 1n })
        const error = yield* failure(query)
        assert.match(error.message, /too large/)
      })
    )

    it.effect("executeScript runs several statements and joins the transaction", () =>
      Effect.gen(function* () {
        const sqlite = yield* SqliteClient.SqliteClient
        yield* sqlite.executeScript("CREATE TABLE script_a (x INTEGER); INSERT INTO script_a VALUES (1), (2);")
        const exit = yield* Effect.exit(
          sqlite.withTransaction(
            sqlite
              .executeScript("INSERT INTO script_a VALUES (3); INSERT INTO script_a VALUES (4);")
              .pipe(Effect.andThen(Effect.fail("undo")))
          )
        )
        assert.isTrue(Exit.isFailure(exit))
        const rows = yield* sqlite<{ x: number }>`SELECT x FROM script_a ORDER BY x`
        assert.deepStrictEqual(rows, [{ x: 1 }, { x: 2 }])
        const error = yield* failure(sqlite.executeScript("CREATE TABLE script_a (x INTEGER)"))
        assert.match(error.message, /already exists/)
      })
    )

    it.effect("returns run info from .raw and arrays from .values", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE raw_v (id INTEGER PRIMARY KEY, v TEXT)`
        const info = yield* sql`INSERT INTO raw_v ${sql.insert([{ v: "a" }, { v: "b" }])}`.raw
        assert.deepStrictEqual(info, { changes: 2, lastInsertRowid: 2 })
        const values = yield* sql`SELECT id, v FROM raw_v ORDER BY id`.values
        assert.deepStrictEqual(values, [
          [1, "a"],
          [2, "b"]
        ])
        const returning = yield* sql<{ id: number }>`INSERT INTO raw_v ${sql.insert({ v: "c" })} RETURNING id`
        assert.deepStrictEqual(returning, [{ id: 3 }])
      })
    )
  })

  it.effect("runs effect's Migrator: pending migrations in a transaction, each once", () =>
    Effect.gen(function* () {
      const migrate = Migrator.make({})
      const first = Migrator.fromRecord({
        "1_create_runs": Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql`CREATE TABLE runs (id INTEGER PRIMARY KEY, agent TEXT NOT NULL)`
        ),
        "2_add_status": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`ALTER TABLE runs ADD COLUMN status TEXT`)
      })
      assert.deepStrictEqual(yield* migrate({ loader: first }), [
        [1, "create_runs"],
        [2, "add_status"]
      ])
      assert.deepStrictEqual(yield* migrate({ loader: first }), [])
      const broken = Migrator.fromRecord({
        "3_create_a": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE a (x INTEGER)`),
        "4_broken": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE runs (x INTEGER)`)
      })
      const error = yield* Effect.flip(migrate({ loader: broken }))
      assert.strictEqual(error._tag, "MigrationError")
      const sql = yield* SqlClient.SqlClient
      const tables = yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
      assert.deepStrictEqual(
        tables.map((t) => t.name),
        ["effect_sql_migrations", "runs"]
      )
      const recorded = yield* sql<{ migration_id: number }>`SELECT migration_id FROM effect_sql_migrations`
      assert.deepStrictEqual(
        recorded.map((r) => r.migration_id),
        [1, 2]
      )
    }).pipe(Effect.provide(SqliteClient.layer({ filename: freshFile() }), { local: true }))
  )

  it.effect("renames columns with transformQueryNames / transformResultNames", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE ${sql("agentRuns")} (${sql("runId")} INTEGER, ${sql("agentName")} TEXT)`
      yield* sql`INSERT INTO ${sql("agentRuns")} ${sql.insert({ runId: 1, agentName: "a" })}`
      const rows = yield* sql`SELECT * FROM agent_runs`
      assert.deepStrictEqual(rows, [{ runId: 1, agentName: "a" }])
      const raw = yield* sql`SELECT * FROM agent_runs`.withoutTransform
      assert.deepStrictEqual(raw, [{ run_id: 1, agent_name: "a" }])
    }).pipe(
      Effect.provide(
        SqliteClient.layer({
          filename: ":memory:",
          transformQueryNames: Str.camelToSnake,
          transformResultNames: Str.snakeToCamel
        }),
        { local: true }
      )
    )
  )

  it.effect("closes the database when the layer is released", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(SqliteClient.layer({ filename }), scope)
      const sql = yield* Effect.provide(Effect.service(SqlClient.SqlClient), context)
      yield* sql`CREATE TABLE t (x INTEGER)`
      yield* Scope.close(scope, Exit.void)
      const error = yield* failure(sql`SELECT * FROM t`)
      assert.match(error.message, /not open/)
    })
  )

  it.effect("opens read-only: reads work, writes fail", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE t (x INTEGER)`).pipe(
        Effect.andThen(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO t VALUES (1)`)),
        Effect.provide(SqliteClient.layer({ filename }), { local: true })
      )
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        assert.deepStrictEqual(yield* sql`SELECT x FROM t`, [{ x: 1 }])
        const error = yield* failure(sql.withTransaction(sql`INSERT INTO t VALUES (2)`))
        assert.match(error.message, /readonly/)
      }).pipe(Effect.provide(SqliteClient.layer({ filename, readonly: true }), { local: true }))
    })
  )

  it.effect("fails to open with a ConnectionError", () =>
    Effect.gen(function* () {
      const error = yield* failure(
        Effect.provide(
          Effect.service(SqlClient.SqlClient),
          SqliteClient.layer({ filename: join(dir, "no/such/dir/x.db") })
        )
      )
      assert.strictEqual(error.reason._tag, "ConnectionError")
      assert.match(error.message, /unable to open database file/)
    })
  )

  it.effect("a busyTimeout it cannot use: opening fails naming the file and the option", () =>
    Effect.gen(function* () {
      const cases = [
        ["abc", 'expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "abc"'],
        [{ seconds: true }, "duration field seconds must be a number, got boolean"],
        [{ milliseconds: "5" }, "duration field milliseconds must be a number, got string"],
        [-1, "must not be negative, got -1"],
        [Number.POSITIVE_INFINITY, "must be at most 2147483647 ms (what SQLite can wait), got Infinity ms"],
        ["25 days", "must be at most 2147483647 ms (what SQLite can wait), got 2160000000 ms"]
      ] as const
      for (const [busyTimeout, reason] of cases) {
        const filename = freshFile()
        const error = yield* failure(
          Effect.provide(
            Effect.service(SqlClient.SqlClient),
            SqliteClient.layer({ filename, busyTimeout: busyTimeout as never })
          )
        )
        assert.strictEqual(
          error.message,
          `cannot open SQLite database ${JSON.stringify(filename)}: busyTimeout: ${reason}`
        )
      }
    })
  )

  it.effect("a file whose folder is missing: the error names the file and the missing folder", () =>
    Effect.gen(function* () {
      const filename = join(dir, "missing-folder/state.db")
      const error = yield* failure(
        Effect.provide(Effect.service(SqlClient.SqlClient), SqliteClient.layer({ filename }))
      )
      assert.strictEqual(
        error.message,
        `cannot open SQLite database ${JSON.stringify(filename)}: unable to open database file (the folder ${JSON.stringify(join(dir, "missing-folder"))} does not exist)`
      )
    })
  )
})

const moduleUrl = (specifier: string): string => pathToFileURL(createRequire(import.meta.url).resolve(specifier)).href

const writerScript = `
import { readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from ${JSON.stringify(moduleUrl("effect"))}
import { Migrator, SqlClient } from ${JSON.stringify(moduleUrl("effect/sql"))}
import * as SqliteClient from ${JSON.stringify(pathToFileURL(fileURLToPath(new URL("../src/SqliteClient.ts", import.meta.url))).href)}

const [filename, worker, count, barrier] = process.argv.slice(2)
const hold = (ms) => { const until = performance.now() + ms; while (performance.now() < until) {} }

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  writeFileSync(join(barrier, worker), "")
  while (readdirSync(barrier).length < 2) hold(1)
  const started = Date.now()
  yield* Migrator.make({})({
    loader: Migrator.fromRecord({
      "1_create_writes": Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql\`CREATE TABLE writes (id INTEGER PRIMARY KEY, worker TEXT NOT NULL, seq INTEGER NOT NULL, seen INTEGER NOT NULL)\`)
    })
  })
  for (let seq = 0; seq < Number(count); seq++) {
    yield* sql.withTransaction(Effect.gen(function*() {
      const [{ seen }] = yield* sql\`SELECT COUNT(*) AS seen FROM writes\`
      hold(1)
      yield* sql\`INSERT INTO writes \${sql.insert({ worker, seq, seen })}\`
    }))
    // After its first commit a worker waits for one of the other's, so neither can finish before the
    // other has started writing, however the machine schedules the two processes.
    while (seq === 0 && (yield* sql\`SELECT COUNT(*) AS n FROM writes WHERE worker <> \${worker}\`)[0].n === 0) hold(1)
  }
  const [{ journal_mode }] = yield* sql\`PRAGMA journal_mode\`
  return { mode: journal_mode, started, finished: Date.now() }
})

Effect.runPromise(program.pipe(Effect.provide(SqliteClient.layer({ filename })))).then(
  (result) => console.log(JSON.stringify(result)),
  (error) => { console.error(String(error)); process.exit(1) }
)
`

interface WorkerResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const runWorker = (script: string, args: ReadonlyArray<string>) =>
  Effect.callback<WorkerResult>((resume) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("SqliteClient across processes", () => {
  it.live(
    "two processes write transactions to one WAL database concurrently",
    () =>
      Effect.gen(function* () {
        const script = join(dir, "writer.mjs")
        writeFileSync(script, writerScript)
        const filename = freshFile()
        const count = 150
        const barrier = mkdtempSync(join(dir, "barrier-"))
        const results = yield* Effect.all(
          ["a", "b"].map((worker) => runWorker(script, [filename, worker, String(count), barrier])),
          { concurrency: "unbounded" }
        )
        const reports = results.map((result) => {
          assert.strictEqual(result.code, 0, result.stderr)
          return JSON.parse(result.stdout) as { mode: string; started: number; finished: number }
        })
        for (const report of reports) assert.strictEqual(report.mode, "wal")
        assert.isBelow(
          Math.max(...reports.map((r) => r.started)),
          Math.min(...reports.map((r) => r.finished)),
          "the two processes wrote at the same time"
        )
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ worker: string; seq: number; seen: number }>`SELECT * FROM writes ORDER BY id`
          assert.strictEqual(rows.length, 2 * count)
          assert.deepStrictEqual(
            rows.map((row) => row.seen),
            rows.map((_, i) => i),
            "each transaction saw every earlier commit"
          )
          for (const worker of ["a", "b"]) {
            assert.deepStrictEqual(
              rows.filter((r) => r.worker === worker).map((r) => r.seq),
              Array.from({ length: count }, (_, i) => i)
            )
          }
          const migrations = yield* sql`SELECT migration_id FROM effect_sql_migrations`
          assert.deepStrictEqual(migrations, [{ migration_id: 1 }])
        }).pipe(Effect.provide(SqliteClient.layer({ filename }), { local: true }))
      }),
    60_000
  )
})
