import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Schedule, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as OwnerSession from "../src/OwnerSession.ts"
import * as PostgresClient from "../src/PostgresClient.ts"
import * as PostgresOptions from "../src/PostgresOptions.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

const namespace = OwnerSession.namespaces.executionOwners

/** Backend pids holding owner 7's session lock, and whether `heldSql` says it is held. */
const observe = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ pid: number }>`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
    AND classid = ${namespace}::oid AND objid = 7 AND objsubid = 2`
  const [held] = yield* sql<{ held: boolean }>`SELECT ${sql.literal(OwnerSession.heldSql(namespace, "7"))} AS held`
  return { pids: rows.map((row) => Number(row.pid)), held: held!.held }
}).pipe(Effect.orDie)

const waitUntil = (done: (seen: Effect.Success<typeof observe>) => boolean) =>
  observe.pipe(
    Effect.flatMap((seen) => (done(seen) ? Effect.succeed(seen) : Effect.fail("not yet"))),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 400 }),
    Effect.orDie
  )

describe.skipIf(server === undefined)("OwnerSession", () => {
  it.live("an every it cannot use dies with PostgresOptions.InvalidOption naming it, before taking the lock", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const cases = [
        [
          "soon",
          'OwnerSession every: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [{ seconds: true }, "OwnerSession every: duration field seconds must be a number, got boolean"],
        [0, "OwnerSession every: must be a positive, finite duration, got 0"]
      ] as const
      yield* Effect.gen(function* () {
        for (const [every, message] of cases) {
          const exit = yield* Effect.exit(
            Effect.scoped(OwnerSession.hold({ namespace, owner: 7, every: every as never, lost: "test: lost" }))
          )
          const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
          assert.instanceOf(defect, PostgresOptions.InvalidOption, JSON.stringify(every))
          assert.strictEqual((defect as Error).message, message)
        }
        assert.deepStrictEqual(yield* observe, { pids: [], held: false })
      }).pipe(Effect.provide(PostgresClient.layer(url, { maxConnections: 2 })))
    })
  )

  it.live("holds the lock while its scope lasts, takes it again after its session is cut, unlocks at the end", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      yield* Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        let locked = 0
        const holder = yield* Scope.make()
        yield* OwnerSession.hold({
          namespace,
          owner: 7,
          every: "100 millis",
          onLocked: Effect.sync(() => locked++),
          lost: "test: the owner's session was lost"
        }).pipe(Scope.provide(holder))
        assert.strictEqual(locked, 1)
        const first = yield* observe
        assert.strictEqual(first.pids.length, 1)
        assert.isTrue(first.held)

        // A cut session (a broken connection, a server restart) loses the lock; the holder takes it again.
        yield* Effect.orDie(sql`SELECT pg_terminate_backend(${first.pids[0]!})`)
        yield* waitUntil((seen) => seen.pids.length === 1 && seen.pids[0] !== first.pids[0] && locked === 2)

        yield* Scope.close(holder, Exit.void)
        const after = yield* waitUntil((seen) => seen.pids.length === 0)
        assert.isFalse(after.held)
      }).pipe(Effect.provide(PostgresClient.layer(url, { maxConnections: 4 })), Effect.orDie)
    })
  )
})
