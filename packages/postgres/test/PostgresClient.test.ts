import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as PostgresClient from "../src/PostgresClient.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

/** The message `PostgresClient.make` fails with for `url`. */
const failure = (url: string) =>
  Effect.scoped(PostgresClient.make(url, { maxConnections: 1 })).pipe(
    Effect.provide(Reactivity.layer),
    Effect.flip,
    Effect.map((error) => error.message)
  )

describe.skipIf(server === undefined)("PostgresClient", () => {
  it.effect("a failed connection says what the server answered, never the password", () =>
    Effect.gen(function* () {
      const port = server!.port
      const noDatabase = yield* failure(`postgres://postgres:secret@127.0.0.1:${port}/nosuchdb`)
      assert.include(noDatabase, `cannot connect to Postgres at postgres://postgres:***@127.0.0.1:${port}/nosuchdb`)
      assert.include(noDatabase, 'database "nosuchdb" does not exist')
      const noRole = yield* failure(`postgres://nobody@127.0.0.1:${port}/postgres`)
      assert.include(noRole, 'role "nobody" does not exist')
      const refused = yield* failure("postgres://postgres:secret@127.0.0.1:1/x")
      assert.include(refused, "ECONNREFUSED")
      for (const message of [noDatabase, noRole, refused]) assert.notInclude(message, "secret")
    })
  )
})
