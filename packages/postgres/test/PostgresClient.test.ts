import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql"
import * as PostgresClient from "../src/PostgresClient.ts"
import * as PostgresLocks from "../src/PostgresLocks.ts"
import * as PostgresOptions from "../src/PostgresOptions.ts"
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

  it.live(
    "options the pool cannot use die with PostgresOptions.InvalidOption naming the option, before connecting",
    () =>
      Effect.gen(function* () {
        const url = `postgres://postgres@127.0.0.1:${server!.port}/postgres`
        const cases: ReadonlyArray<readonly [PostgresClient.Options, string]> = [
          [{ maxConnections: Number.NaN }, "PostgresClient maxConnections: must be a whole number from 1 up, got NaN"],
          [{ maxConnections: 0 }, "PostgresClient maxConnections: must be a whole number from 1 up, got 0"],
          [{ maxConnections: -1 }, "PostgresClient maxConnections: must be a whole number from 1 up, got -1"],
          [
            { connectTimeout: "soon" as never },
            'PostgresClient connectTimeout: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
          ],
          [
            { connectTimeout: { seconds: true } as never },
            "PostgresClient connectTimeout: duration field seconds must be a number, got boolean"
          ],
          [{ connectTimeout: Number.NaN }, "PostgresClient connectTimeout: must be a number of milliseconds, got NaN"],
          [{ connectTimeout: 0 }, "PostgresClient connectTimeout: must be a positive, finite duration, got 0"]
        ]
        for (const [options, message] of cases) {
          const exit = yield* Effect.scoped(PostgresClient.make(url, options)).pipe(
            Effect.provide(Reactivity.layer),
            Effect.timeout("5 seconds"),
            Effect.exit
          )
          const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
          assert.instanceOf(defect, PostgresOptions.InvalidOption, JSON.stringify(options))
          assert.strictEqual((defect as Error).message, message)
        }
      })
  )

  it.live("a migration that fails: StartFailed names the migration and says the server's answer", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE corral_leases (other INTEGER)`).pipe(
        Effect.provide(PostgresClient.layer(url)),
        Effect.orDie
      )
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(PostgresLocks.layer(url))))
      const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : undefined
      assert.isTrue(error !== undefined && error._tag === "Some", Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
      const failed = (error as { readonly value: unknown }).value
      assert.instanceOf(failed, PostgresClient.StartFailed)
      assert.strictEqual(
        (failed as PostgresClient.StartFailed).message,
        'PostgresLocks could not start: Migration "1_create_leases" failed: PgConnection: Query failed (relation "corral_leases" already exists)'
      )
    })
  )

  it.live("an interrupted start whose clean-up query fails stays interrupted, with StartFailed beside it", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const cleanUp = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE never_made`).pipe(Effect.orDie)
      const start = Effect.scoped(
        Effect.andThen(
          Effect.addFinalizer(() => cleanUp),
          Effect.interrupt
        )
      )
      for (const wrapped of [
        start.pipe(PostgresClient.starting("Probe"), Effect.provide(PostgresClient.layer(url))),
        Effect.scoped(
          Layer.build(
            Layer.effectDiscard(start).pipe(
              PostgresClient.startingLayer("Probe"),
              Layer.provide(PostgresClient.layer(url))
            )
          )
        )
      ]) {
        const exit = yield* Effect.exit(wrapped)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isSuccess(exit)) return
        assert.isTrue(Cause.hasInterrupts(exit.cause), Cause.pretty(exit.cause))
        const failed = Cause.findErrorOption(exit.cause)
        assert.strictEqual(failed._tag, "Some", Cause.pretty(exit.cause))
        assert.strictEqual(
          failed._tag === "Some" ? (failed.value as Error).message : "",
          'Probe could not start: PgConnection: Query failed (table "never_made" does not exist)'
        )
      }
    })
  )
})
