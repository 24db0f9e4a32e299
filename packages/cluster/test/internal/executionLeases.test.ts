import { PostgresClient } from "@corral/postgres"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Schedule, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { sharedServer } from "../../../postgres/test/support/server.ts"
import * as ExecutionLeases from "../../src/internal/executionLeases.ts"

const server = await sharedServer()

/** A lease service with its own pool (its own owner), closed with `scope`. */
const service = (url: string, scope: Scope.Scope, options: Partial<ExecutionLeases.Options> = {}) =>
  Effect.gen(function* () {
    const context = yield* Layer.buildWithScope(Layer.orDie(PostgresClient.layer(url, { maxConnections: 3 })), scope)
    return yield* ExecutionLeases.make({
      ttl: "30 seconds",
      renewEvery: "10 seconds",
      retryEvery: "20 millis",
      ...options
    }).pipe(
      Effect.provideService(SqlClient.SqlClient, Context.get(context, SqlClient.SqlClient)),
      Scope.provide(scope),
      Effect.orDie
    )
  })

describe.skipIf(server === undefined)("ExecutionLeases", () => {
  it.live("a taken lease blocks another service until it is given back; the next token is larger", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const scope = yield* Effect.scope
      const [a, b] = [yield* service(url, scope), yield* service(url, scope)]
      const first = yield* a.acquire("run/agent")
      const waiting = yield* Effect.forkChild(b.acquire("run/agent"), { startImmediately: true })
      assert.isTrue(yield* a.isCurrent(first))
      // true only if no one took the lease over meanwhile: the waiter did not get it while it was held
      assert.isTrue(yield* a.release(first), "given back while current")
      const second = yield* Fiber.join(waiting)
      assert.isAbove(second.fencingToken, first.fencingToken)
      assert.isFalse(yield* a.isCurrent(first))
      assert.isTrue(yield* b.isCurrent(second))
      const other = yield* a.acquire("run/other")
      assert.isAbove(other.fencingToken, second.fencingToken, "tokens come from one sequence")
    }).pipe(Effect.scoped)
  )

  it.live(
    "takes and gives back made at once go together: each distinct entity is taken once, a second take of one waits",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const a = yield* service(url, yield* Effect.scope)
        const entities = Array.from({ length: 40 }, (_, i) => `run/agent-${i}`)
        const leases = yield* Effect.forEach(entities, (entity) => a.acquire(entity), { concurrency: "unbounded" })
        assert.deepStrictEqual(
          leases.map((lease) => lease.entity),
          entities
        )
        assert.strictEqual(new Set(leases.map((lease) => lease.fencingToken)).size, 40, "one token each")
        const released = yield* Effect.forEach(leases, (lease) => a.release(lease), { concurrency: "unbounded" })
        assert.isTrue(
          released.every((current) => current),
          "every lease was current until given back"
        )
        for (const lease of leases) assert.isFalse(yield* a.isCurrent(lease))
        // the same entity twice in one burst: one take holds it, the other waits for its release
        const takes = [
          yield* Effect.forkChild(a.acquire("run/twice"), { startImmediately: true }),
          yield* Effect.forkChild(a.acquire("run/twice"), { startImmediately: true })
        ] as const
        const [first, other] = yield* Effect.raceFirst(
          Effect.map(Fiber.join(takes[0]), (lease) => [lease, takes[1]] as const),
          Effect.map(Fiber.join(takes[1]), (lease) => [lease, takes[0]] as const)
        )
        assert.isUndefined(other.pollUnsafe(), "the second take waits while the first holds the lease")
        assert.isTrue(yield* a.release(first))
        const second = yield* Fiber.join(other)
        assert.isAbove(second.fencingToken, first.fencingToken)
      }).pipe(Effect.scoped)
  )

  it.live("an expired lease is taken over, and its holder learns it is no longer current", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const scope = yield* Effect.scope
      // never renewed within the test: the lease lapses after its TTL
      const stale = yield* service(url, scope, { ttl: "300 millis", renewEvery: "1 hour" })
      const b = yield* service(url, scope)
      const old = yield* stale.acquire("run/agent")
      const taken = yield* b.acquire("run/agent")
      assert.isAbove(taken.fencingToken, old.fencingToken)
      assert.isFalse(yield* stale.isCurrent(old))
      assert.isFalse(yield* stale.release(old), "a lost lease is not given back as current")
      assert.isTrue(yield* b.isCurrent(taken), "giving back a lost lease leaves the new holder's")
    }).pipe(Effect.scoped)
  )

  it.live("a lease whose holder's session ended is taken over before its TTL", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const deadScope = yield* Scope.make()
      const dead = yield* service(url, deadScope, { ttl: "1 hour" })
      const old = yield* dead.acquire("run/agent")
      yield* Scope.close(deadScope, Exit.void)
      const b = yield* service(url, yield* Effect.scope)
      const taken = yield* b.acquire("run/agent")
      assert.isAbove(taken.fencingToken, old.fencingToken)
    }).pipe(Effect.scoped)
  )

  it.live(
    "a take interrupted while its statement runs gives the lease back: another service takes it before the TTL",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const scope = yield* Effect.scope
        const a = yield* service(url, scope)
        const b = yield* service(url, scope)
        // what a runner does when the coordinator stops a run whose agent is just being dispatched
        const taking = yield* Effect.forkChild(
          Effect.uninterruptibleMask(() => a.acquire("run/agent")),
          {
            startImmediately: true
          }
        )
        yield* Fiber.interrupt(taking)
        const taken = yield* b.acquire("run/agent").pipe(Effect.timeout("5 seconds"), Effect.option)
        assert.isTrue(Option.isSome(taken), "taken within 5 s (the TTL is 30 s)")
      }).pipe(Effect.scoped)
  )

  it.live("a holder renews its leases", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const scope = yield* Effect.scope
      const a = yield* service(url, scope, { renewEvery: "100 millis" })
      const lease = yield* a.acquire("run/agent")
      const sql = Context.get(
        yield* Layer.build(Layer.orDie(PostgresClient.layer(url, { maxConnections: 1 }))),
        SqlClient.SqlClient
      )
      const expiry = Effect.map(
        sql<{ expires_at: string }>`SELECT expires_at FROM corral_executions WHERE entity = 'run/agent'`,
        (rows) => Number(rows[0]!.expires_at)
      ).pipe(Effect.orDie)
      const first = yield* expiry
      yield* expiry.pipe(Effect.repeat({ schedule: Schedule.spaced("50 millis"), until: (at) => at > first }))
      assert.isTrue(yield* a.isCurrent(lease))
    }).pipe(Effect.scoped)
  )
})
