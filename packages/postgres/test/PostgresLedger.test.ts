import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { runLedgerContract } from "../../platform-node/test/contracts/RunLedgerContract.ts"
import * as PostgresClient from "../src/PostgresClient.ts"
import * as PostgresLedger from "../src/PostgresLedger.ts"
import * as PostgresLiveness from "../src/PostgresLiveness.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

/** A fresh database and the URL of a role that may connect to it but not create tables (PostgreSQL 15's default for `public`). */
const readOnlyRole = Effect.gen(function* () {
  const url = yield* Effect.orDie(server!.createDatabase())
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

describe.skipIf(server === undefined)("PostgresLedger", () => {
  runLedgerContract("postgres", () =>
    Layer.unwrap(Effect.map(Effect.orDie(server!.createDatabase()), (url) => Layer.orDie(PostgresLedger.layer(url))))
  )

  it.live("a role that may not create the tables: the ledger and liveness layers fail with the server's answer", () =>
    Effect.gen(function* () {
      const url = yield* readOnlyRole
      const ledger = yield* Effect.flip(Effect.scoped(Layer.build(PostgresLedger.layer(url))))
      assert.strictEqual(ledger._tag, "RunLedgerError")
      assert.include(ledger.message, "permission denied for schema public")
      const liveness = yield* Effect.flip(Effect.scoped(Layer.build(PostgresLiveness.layer(url))))
      assert.strictEqual(liveness._tag, "RunLedgerError")
      assert.include(liveness.message, "permission denied for schema public")
    })
  )
})
