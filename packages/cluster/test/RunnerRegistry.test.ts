import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Schedule, Tracer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { sharedServer } from "../../postgres/test/support/server.ts"
import { PostgresClient, PostgresOptions } from "@corral/postgres"
import * as RunnerRegistry from "../src/RunnerRegistry.ts"
import { runnerProcess } from "./support/runnerProcess.ts"

const runnerScript = fileURLToPath(new URL("./support/runner.ts", import.meta.url))

const server = await sharedServer()

/** The SQL text of every statement run under it, read from the spans the statements make. */
const statementsTracer = (texts: Array<string>) =>
  Tracer.make({
    span(options) {
      const span = Tracer.nativeTracer.span(options)
      const attribute = span.attribute.bind(span)
      span.attribute = (key, value) => {
        if (key === "db.query.text") texts.push(String(value))
        attribute(key, value)
      }
      return span
    }
  })

/** A fresh database of the shared server, as the `SqlClient` of the effect it is provided to. */
const database = Layer.unwrap(
  Effect.map(Effect.orDie(Effect.suspend(() => server!.createDatabase())), (url) =>
    PostgresClient.layer(url, { maxConnections: 1 })
  )
)

describe.skipIf(server === undefined)("RunnerRegistry", () => {
  it.live("register with an interval it cannot use dies with PostgresOptions.InvalidOption naming it", () =>
    Effect.gen(function* () {
      const cases = [
        [
          { heartbeatEvery: "soon" as never },
          'RunnerRegistry heartbeatEvery: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [
          { heartbeatEvery: { seconds: true } as never },
          "RunnerRegistry heartbeatEvery: duration field seconds must be a number, got boolean"
        ],
        [{ shardsCheckEvery: 0 }, "RunnerRegistry shardsCheckEvery: must be a positive, finite duration, got 0"],
        [
          { shardsCheckEvery: { milliseconds: "5" } as never },
          "RunnerRegistry shardsCheckEvery: duration field milliseconds must be a number, got string"
        ]
      ] as const
      for (const [options, message] of cases) {
        const registration = { address: "127.0.0.1:1", capacity: 1, labels: [], running: () => 0, ...options }
        const exit = yield* Effect.exit(Effect.scoped(RunnerRegistry.register(registration)))
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.instanceOf(defect, PostgresOptions.InvalidOption, JSON.stringify(options))
        assert.strictEqual((defect as Error).message, message)
      }
      assert.deepStrictEqual(yield* RunnerRegistry.list(), [], "no runner was registered")
    }).pipe(Effect.provide(database))
  )

  it.live("list({ migrate: false }) runs one statement per read; the default also checks the migrations", () =>
    Effect.gen(function* () {
      const texts: Array<string> = []
      const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.suspend(() => {
          texts.length = 0
          return Effect.map(Effect.withTracer(effect, statementsTracer(texts)), () => texts.length)
        })
      yield* RunnerRegistry.list()
      const checked = yield* counted(RunnerRegistry.list())
      assert.isAbove(checked, 1, "the default read checks the migrations first")
      const plain = yield* counted(RunnerRegistry.list(10_000, { migrate: false }))
      assert.strictEqual(plain, 1)
      assert.match(texts[0]!, /FROM corral_runners/)
    }).pipe(
      Effect.provide(
        Effect.map(Effect.orDie(server!.createDatabase()), (url) =>
          PostgresClient.layer(url, { maxConnections: 1 })
        ).pipe(Layer.unwrap)
      )
    )
  )

  it.live(
    "a SIGKILLed runner's row is deleted by a registration once long dead; a live runner's row stays or comes back",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const sql = Context.get(
          yield* Layer.build(PostgresClient.layer(url, { maxConnections: 2 })),
          SqlClient.SqlClient
        )
        const rows = Effect.map(
          Effect.orDie(sql<{ address: string }>`SELECT address FROM corral_runners ORDER BY address`),
          (found) => found.map((row) => row.address)
        )
        // as if `minutes` had passed without a heartbeat (the check reads the database clock)
        const age = (address: string, minutes: number) =>
          Effect.orDie(
            sql`UPDATE corral_runners SET heartbeat_at = heartbeat_at - ${minutes * 60_000} WHERE address = ${address}`
          )
        const register = (port: number) =>
          Effect.scoped(
            RunnerRegistry.register({ address: `127.0.0.1:${port}`, capacity: 1, labels: [], running: () => 0 })
          ).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
        const killed = yield* runnerProcess(runnerScript, url, 1, "")
        const live = yield* runnerProcess(runnerScript, url, 1, "")
        const exited = Effect.callback<void>((resume) => {
          killed.child.once("exit", () => resume(Effect.void))
        })
        killed.child.kill("SIGKILL")
        yield* exited
        const both = [killed.address, live.address].sort()
        yield* age(killed.address, 0.5)
        yield* register(1)
        assert.deepStrictEqual(yield* rows, both, "dead for half a minute: kept")
        yield* age(killed.address, 60)
        yield* register(2)
        assert.deepStrictEqual(yield* rows, [live.address], "the live runner's row, refreshed 2 s ago, stays")
        // a live runner that wrote no heartbeat for an hour (cut off from the server) loses its row
        // to the next registration and writes it again with its next heartbeat
        yield* age(live.address, 60)
        yield* register(3)
        yield* Effect.suspend(() => rows).pipe(
          Effect.flatMap((found) => (found.includes(live.address) ? Effect.void : Effect.fail("not yet"))),
          Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 200 }),
          Effect.orDie
        )
        assert.deepStrictEqual(yield* rows, [live.address])
      }).pipe(Effect.scoped),
    60_000
  )
})
