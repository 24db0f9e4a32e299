import { assert, layer } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, type Layer, Schema, Stream } from "effect"
import { SqlClient, SqlError, SqlSchema } from "effect/sql"

let tables = 0
const freshTable = (prefix: string): string => `${prefix}_${process.pid}_${tables++}`

const createItems = (sql: SqlClient.SqlClient, table: string) =>
  sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE ${sql(table)} (
        id SERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER, score DOUBLE PRECISION, big BIGINT, data BYTEA
      )`,
    orElse: () =>
      sql`CREATE TABLE ${sql(table)} (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER, score REAL, big INTEGER, data BLOB
      )`
  })

const withItems = <A, E, R>(f: (sql: SqlClient.SqlClient, table: string) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const table = freshTable("items")
    yield* createItems(sql, table)
    return yield* f(sql, table)
  })

const names = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(sql<{ name: string }>`SELECT name FROM ${sql(table)} ORDER BY name`, (rows) => rows.map((r) => r.name))

const sqlErrorOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(effect)
    assert.isTrue(Exit.isFailure(exit), "expected a failure")
    const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
    assert.isTrue(SqlError.isSqlError(error), `expected a SqlError, got ${String(error)}`)
    return error as SqlError.SqlError
  })

/**
 * Tests every `SqlClient` implementation must pass. Tables get unique names, so the suite can share
 * one database with other tests.
 */
export const sqlClientContract = (name: string, clientLayer: Layer.Layer<SqlClient.SqlClient, unknown>): void =>
  layer(clientLayer, { timeout: "60 seconds" })(`SqlClient contract: ${name}`, (it) => {
    it.effect("inserts and selects rows, with sql.insert, sql.in and identifiers", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert([
            { name: "a", n: 1 },
            { name: "b", n: 2 },
            { name: "c", n: 3 }
          ])}`
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "d", n: 4 })}`
          const rows = yield* sql<{ name: string; n: number }>`
            SELECT name, n FROM ${sql(table)} WHERE ${sql.in("name", ["a", "c", "d"])} ORDER BY n`
          assert.deepStrictEqual(rows, [
            { name: "a", n: 1 },
            { name: "c", n: 3 },
            { name: "d", n: 4 }
          ])
          const none = yield* sql`SELECT name FROM ${sql(table)} WHERE ${sql.in("name", [])}`
          assert.deepStrictEqual(none, [])
          const [count] = yield* sql<{ total: number }>`SELECT COUNT(*) AS total FROM ${sql(table)} WHERE n > ${1}`
          assert.strictEqual(Number(count!.total), 3)
          yield* sql`UPDATE ${sql(table)} SET ${sql.update({ n: 40 })} WHERE name = ${"d"}`
          const [d] = yield* sql<{ n: number }>`SELECT n FROM ${sql(table)} WHERE name = ${"d"}`
          assert.strictEqual(d!.n, 40)
        })
      )
    )

    it.effect("binds null, numbers, strings, bigints and blobs", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const big = 9007199254740993n
          const data = new Uint8Array([0, 1, 2, 254, 255])
          const text = `it's "quoted" ; -- ünïcødé 🐑`
          yield* sql`INSERT INTO ${sql(table)} (name, n, score, big, data) VALUES (${text}, ${null}, ${1.5}, ${big}, ${data})`
          const rows = yield* sql<{ name: string; n: null; score: number; big: unknown; data: Uint8Array }>`
            SELECT name, n, score, big, data FROM ${sql(table)} WHERE big = ${big} AND n IS NULL`.pipe(
            Effect.provideService(SqlClient.SafeIntegers, true)
          )
          assert.strictEqual(rows.length, 1)
          const row = rows[0]!
          assert.strictEqual(row.name, text)
          assert.strictEqual(row.n, null)
          assert.strictEqual(row.score, 1.5)
          assert.strictEqual(String(row.big), "9007199254740993")
          assert.deepStrictEqual(Array.from(row.data), Array.from(data))
          const [echo] = yield* sql<{ s: string; i: number }>`SELECT ${"x"} AS s, ${-42} AS i`
          assert.deepStrictEqual({ s: echo!.s, i: Number(echo!.i) }, { s: "x", i: -42 })
        })
      )
    )

    it.effect("withTransaction commits", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const result = yield* sql.withTransaction(
            Effect.as(sql`INSERT INTO ${sql(table)} ${sql.insert([{ name: "a" }, { name: "b" }])}`, "done")
          )
          assert.strictEqual(result, "done")
          assert.deepStrictEqual(yield* names(sql, table), ["a", "b"])
        })
      )
    )

    it.effect("withTransaction rolls back on failure and keeps the error", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(
            sql.withTransaction(
              sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "a" })}`.pipe(Effect.andThen(Effect.fail("abort")))
            )
          )
          assert.deepStrictEqual(exit, Exit.fail("abort"))
          assert.deepStrictEqual(yield* names(sql, table), [])
        })
      )
    )

    it.effect("withTransaction rolls back when interrupted", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const inserted = yield* Deferred.make<void>()
          const fiber = yield* Effect.forkChild(
            sql.withTransaction(
              sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "a" })}`.pipe(
                Effect.andThen(Deferred.succeed(inserted, undefined)),
                Effect.andThen(Effect.never)
              )
            )
          )
          yield* Deferred.await(inserted)
          yield* Fiber.interrupt(fiber)
          assert.deepStrictEqual(yield* names(sql, table), [])
        })
      )
    )

    it.effect("a failed nested transaction rolls back only its savepoint", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "outer-1" })}`
              const inner = yield* Effect.exit(
                sql.withTransaction(
                  sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "inner" })}`.pipe(
                    Effect.andThen(Effect.fail("no"))
                  )
                )
              )
              assert.isTrue(Exit.isFailure(inner))
              yield* sql.withTransaction(sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "inner-ok" })}`)
              yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "outer-2" })}`
            })
          )
          assert.deepStrictEqual(yield* names(sql, table), ["inner-ok", "outer-1", "outer-2"])
        })
      )
    )

    it.effect("a failed outer transaction rolls back its committed savepoints", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(
            sql.withTransaction(
              Effect.gen(function* () {
                yield* sql.withTransaction(sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "inner" })}`)
                yield* sql.withTransaction(
                  sql.withTransaction(sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "deep" })}`)
                )
                return yield* Effect.fail("outer failed")
              })
            )
          )
          assert.deepStrictEqual(exit, Exit.fail("outer failed"))
          assert.deepStrictEqual(yield* names(sql, table), [])
        })
      )
    )

    it.effect("serializes 50 concurrent transactions: every row lands, none fail", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const writers = Array.from({ length: 50 }, (_, i) =>
            sql.withTransaction(
              Effect.gen(function* () {
                yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: `w${i}-a`, n: i })}`
                yield* Effect.yieldNow
                yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: `w${i}-b`, n: i })}`
                const own = yield* sql<{ total: number }>`SELECT COUNT(*) AS total FROM ${sql(table)} WHERE n = ${i}`
                return Number(own[0]!.total)
              })
            )
          )
          const counts = yield* Effect.all(writers, { concurrency: "unbounded" })
          assert.deepStrictEqual(
            counts,
            Array.from({ length: 50 }, () => 2)
          )
          const [total] = yield* sql<{ total: number }>`SELECT COUNT(*) AS total FROM ${sql(table)}`
          assert.strictEqual(Number(total!.total), 100)
        })
      )
    )

    it.effect("fails with a SqlError carrying the database's message", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const syntax = yield* sqlErrorOf(sql`SELEC nothing`)
          assert.strictEqual(syntax.reason._tag, "SqlSyntaxError")
          assert.match(syntax.message, /syntax error/i)
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "dup" })}`
          const unique = yield* sqlErrorOf(sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "dup" })}`)
          assert.strictEqual(unique.reason._tag, "UniqueViolation")
          assert.isFalse(unique.isRetryable)
          const inTransaction = yield* sqlErrorOf(
            sql.withTransaction(sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "dup" })}`)
          )
          assert.strictEqual(inTransaction.reason._tag, "UniqueViolation")
          assert.deepStrictEqual(yield* names(sql, table), ["dup"])
        })
      )
    )

    it.effect("SqlSchema.findAll decodes rows and reports bad ones", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert([
            { name: "a", n: 1 },
            { name: "b", n: 2 },
            { name: "c", n: null }
          ])}`
          const Item = Schema.Struct({ name: Schema.String, n: Schema.Number })
          const atLeast = SqlSchema.findAll({
            Request: Schema.Number,
            Result: Item,
            execute: (min) => sql`SELECT name, n FROM ${sql(table)} WHERE n >= ${min} ORDER BY n`
          })
          assert.deepStrictEqual(yield* atLeast(1), [
            { name: "a", n: 1 },
            { name: "b", n: 2 }
          ])
          assert.deepStrictEqual(yield* atLeast(5), [])
          const all = SqlSchema.findAll({
            Request: Schema.Void,
            Result: Item,
            execute: () => sql`SELECT name, n FROM ${sql(table)} ORDER BY name`
          })
          const bad = yield* Effect.exit(all(undefined))
          assert.isTrue(Exit.isFailure(bad))
        })
      )
    )

    it.effect("streams rows", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const rows = Array.from({ length: 300 }, (_, i) => ({ name: `r${String(i).padStart(3, "0")}`, n: i }))
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert(rows as [(typeof rows)[number], ...typeof rows])}`
          const streamed = yield* Stream.runCollect(sql<{ n: number }>`SELECT n FROM ${sql(table)} ORDER BY n`.stream)
          assert.deepStrictEqual(
            streamed.map((r) => r.n),
            rows.map((r) => r.n)
          )
        })
      )
    )

    it.effect("afterCommit runs after COMMIT and not after ROLLBACK", () =>
      withItems((sql, table) =>
        Effect.gen(function* () {
          const log: Array<string> = []
          yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ name: "a" })}`
              yield* sql.afterCommit(Effect.sync(() => log.push("committed")))
              log.push("body")
            })
          )
          yield* Effect.exit(
            sql.withTransaction(
              sql.afterCommit(Effect.sync(() => log.push("rolled back"))).pipe(Effect.andThen(Effect.fail("x")))
            )
          )
          assert.deepStrictEqual(log, ["body", "committed"])
        })
      )
    )
  })
