import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type * as Arr from "effect/Array"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import type * as SqlError from "effect/sql/SqlError"
import { toSqlError } from "./sqliteError.ts"

type TransformRows = (<A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined

/** A `Connection` over one `DatabaseSync`, plus what only SQLite offers. */
export interface SqliteConnection extends SqlConnection.Connection {
  readonly executeScript: (sql: string) => Effect.Effect<void, SqlError.SqlError>
  readonly isTransaction: () => boolean
}

const streamBatchSize = 128

const toInput = (value: unknown): SQLInputValue => {
  switch (typeof value) {
    case "undefined":
      return null
    case "boolean":
      return value ? 1 : 0
    case "object":
      return value instanceof Date ? value.toISOString() : (value as SQLInputValue)
    default:
      return value as SQLInputValue
  }
}

const bind = (params: ReadonlyArray<unknown>): Array<SQLInputValue> => {
  const out = new Array<SQLInputValue>(params.length)
  for (let i = 0; i < params.length; i++) out[i] = toInput(params[i])
  return out
}

const toPlainRows = (rows: Array<Record<string, unknown>>): Array<Record<string, unknown>> => {
  for (let i = 0; i < rows.length; i++) rows[i] = { ...rows[i] }
  return rows
}

export const makeConnection = (db: DatabaseSync, options: { readonly cacheSize: number }): SqliteConnection => {
  const cache = new Map<string, StatementSync>()

  const prepare = (sql: string): StatementSync => {
    const cached = cache.get(sql)
    if (cached !== undefined) return cached
    const statement = db.prepare(sql)
    if (options.cacheSize > 0) {
      if (cache.size >= options.cacheSize) cache.delete(cache.keys().next().value!)
      cache.set(sql, statement)
    }
    return statement
  }

  const attempt = <A>(
    operation: string,
    sql: string,
    f: (readBigInts: boolean) => A
  ): Effect.Effect<A, SqlError.SqlError> =>
    Effect.withFiber((fiber) => {
      try {
        return Effect.succeed(f(fiber.getRef(SqlClient.SafeIntegers)))
      } catch (cause) {
        return Effect.fail(toSqlError(cause, operation, sql))
      }
    })

  const all = (
    statement: StatementSync,
    params: ReadonlyArray<unknown>,
    readBigInts: boolean,
    returnArrays: boolean
  ): Array<any> => {
    statement.setReadBigInts(readBigInts)
    statement.setReturnArrays(returnArrays)
    return statement.all(...bind(params))
  }

  const rows = (statement: StatementSync, params: ReadonlyArray<unknown>, readBigInts: boolean) =>
    toPlainRows(all(statement, params, readBigInts, false))

  const transformed = (result: Array<any>, transformRows: TransformRows): ReadonlyArray<any> =>
    transformRows === undefined ? result : transformRows(result)

  const executeStream = (
    sql: string,
    params: ReadonlyArray<unknown>,
    transformRows: TransformRows
  ): Stream.Stream<any, SqlError.SqlError> =>
    Stream.suspend(() => {
      let iterator: Iterator<Record<string, unknown>> | undefined
      const pull = Effect.suspend((): Effect.Effect<Arr.NonEmptyReadonlyArray<any>, SqlError.SqlError | Cause.Done> => {
        const batch: Array<Record<string, unknown>> = []
        try {
          for (let next = iterator!.next(); !next.done; next = iterator!.next()) {
            batch.push({ ...next.value })
            if (batch.length === streamBatchSize) break
          }
        } catch (cause) {
          return Effect.fail(toSqlError(cause, "stream", sql))
        }
        return batch.length === 0
          ? Cause.done()
          : Effect.succeed(transformed(batch, transformRows) as Arr.NonEmptyReadonlyArray<any>)
      })
      const open = attempt("stream", sql, (readBigInts) => {
        const statement = db.prepare(sql)
        statement.setReadBigInts(readBigInts)
        iterator = statement.iterate(...bind(params))
        return pull
      })
      return Stream.fromPull(open).pipe(Stream.ensuring(Effect.sync(() => iterator?.return?.())))
    })

  return {
    execute: (sql, params, transformRows) =>
      attempt("execute", sql, (readBigInts) => transformed(rows(prepare(sql), params, readBigInts), transformRows)),
    executeRaw: (sql, params) =>
      attempt("executeRaw", sql, (readBigInts) => {
        const statement = prepare(sql)
        if (statement.columns().length > 0) return rows(statement, params, readBigInts)
        statement.setReadBigInts(readBigInts)
        return statement.run(...bind(params))
      }),
    executeValues: (sql, params) =>
      attempt("executeValues", sql, (readBigInts) => all(prepare(sql), params, readBigInts, true)),
    executeUnprepared: (sql, params, transformRows) =>
      attempt("executeUnprepared", sql, (readBigInts) =>
        transformed(rows(db.prepare(sql), params, readBigInts), transformRows)
      ),
    executeValuesUnprepared: (sql, params) =>
      attempt("executeValuesUnprepared", sql, (readBigInts) => all(db.prepare(sql), params, readBigInts, true)),
    executeStream,
    executeScript: (sql) => attempt("executeScript", sql, () => db.exec(sql)),
    isTransaction: () => db.isTransaction
  }
}
