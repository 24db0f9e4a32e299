import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { runLedgerContract } from "../../platform-node/test/contracts/RunLedgerContract.ts"
import * as PostgresLedger from "../src/PostgresLedger.ts"
import * as PostgresLiveness from "../src/PostgresLiveness.ts"
import { readOnlyRole } from "./support/readOnlyRole.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

describe.skipIf(server === undefined)("PostgresLedger", () => {
  runLedgerContract("postgres", () =>
    Layer.unwrap(Effect.map(Effect.orDie(server!.createDatabase()), (url) => Layer.orDie(PostgresLedger.layer(url))))
  )

  it.live("a role that may not create the tables: the ledger and liveness layers fail with the server's answer", () =>
    Effect.gen(function* () {
      const url = yield* readOnlyRole(server!)
      const ledger = yield* Effect.flip(Effect.scoped(Layer.build(PostgresLedger.layer(url))))
      assert.strictEqual(ledger._tag, "RunLedgerError")
      assert.include(ledger.message, "permission denied for schema public")
      const liveness = yield* Effect.flip(Effect.scoped(Layer.build(PostgresLiveness.layer(url))))
      assert.strictEqual(liveness._tag, "RunLedgerError")
      assert.include(liveness.message, "permission denied for schema public")
    })
  )
})
