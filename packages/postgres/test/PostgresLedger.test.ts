import { describe } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { runLedgerContract } from "../../platform-node/test/contracts/RunLedgerContract.ts"
import * as PostgresLedger from "../src/PostgresLedger.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

describe.skipIf(server === undefined)("PostgresLedger", () => {
  runLedgerContract("postgres", () =>
    Layer.unwrap(Effect.map(Effect.orDie(server!.createDatabase()), (url) => Layer.orDie(PostgresLedger.layer(url))))
  )
})
