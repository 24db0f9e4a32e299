import { Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as PostgresClient from "../../src/PostgresClient.ts"
import type * as TestServer from "../../src/TestServer.ts"

/**
 * A fresh database of `server` and the URL of a role that may connect to it but not create tables
 * (PostgreSQL 15's default for `public`).
 */
export const readOnlyRole = (server: TestServer.TestServer) =>
  Effect.gen(function* () {
    const url = yield* Effect.orDie(server.createDatabase())
    const role = `reader_${Math.random().toString(36).slice(2, 10)}`
    yield* Effect.scoped(
      Effect.flatMap(PostgresClient.layer(url).pipe(Layer.build), (context) =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(`CREATE ROLE ${role} LOGIN`)
          yield* sql.unsafe(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`)
        }).pipe(Effect.provideContext(context))
      )
    ).pipe(Effect.orDie)
    const parsed = new URL(url)
    parsed.username = role
    return parsed.toString()
  })
