import { type ChildProcess, spawn } from "node:child_process"
import * as NodeOs from "node:os"
import { fileURLToPath, pathToFileURL } from "node:url"
import { RunLedger, RunLiveness } from "@corral/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer, Schedule, Scope } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as PostgresClient from "../src/PostgresClient.ts"
import * as PostgresLiveness from "../src/PostgresLiveness.ts"
import * as PostgresOptions from "../src/PostgresOptions.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

const freshDatabase = Effect.orDie(Effect.suspend(() => server!.createDatabase()))

/** A ledger and a liveness service with a pool of their own: what one machine's `corral` opens. */
const machine = (url: string, options: PostgresLiveness.Options = {}) =>
  Effect.map(
    Layer.build(
      Layer.fresh(
        Layer.orDie(
          Layer.merge(RunLedger.layerSql(), PostgresLiveness.layerClient(options)).pipe(
            Layer.provide(PostgresClient.layer(url, { maxConnections: 4 }))
          )
        )
      )
    ),
    (context) => ({
      ledger: Context.get(context, RunLedger.RunLedger),
      liveness: Context.get(context, RunLiveness.RunLiveness),
      context
    })
  )

/** A client of its own to look at and change the coordinators' table as another program would. */
const inspector = (url: string) =>
  Effect.map(Layer.build(PostgresClient.layer(url, { maxConnections: 1 })), (context) =>
    Context.get(context, SqlClient.SqlClient)
  )

const waitUntil = (check: Effect.Effect<boolean>) =>
  Effect.suspend(() => check).pipe(
    Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail("not yet"))),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 400 }),
    Effect.orDie
  )

const start = (runId: string) => ({
  runId,
  planFile: "plan.yaml",
  planHash: "h",
  options: {},
  pid: 1,
  hostname: "machine-a",
  startedAt: Date.now(),
  agents: [{ agentId: "a", dependsOn: [] }]
})

const livenessUrl = pathToFileURL(fileURLToPath(new URL("../src/PostgresLiveness.ts", import.meta.url))).href
const platformUrl = pathToFileURL(fileURLToPath(new URL("../../platform-node/src/index.ts", import.meta.url))).href

const holderScript = `
import { Effect } from "effect"
import { RunLiveness } from ${JSON.stringify(platformUrl)}
import * as PostgresLiveness from ${JSON.stringify(livenessUrl)}
const [url, runId] = process.argv.slice(1)
Effect.runPromise(Effect.gen(function*() {
  yield* (yield* RunLiveness.RunLiveness).hold({ runId })
  console.log("held")
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(PostgresLiveness.layer(url, { heartbeatEvery: "200 millis" }))))
  .catch((error) => { console.error(String(error)); process.exit(1) })
`

/** A coordinator process that holds `runId` until it is killed. */
const holderProcess = (url: string, runId: string) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess>((resume) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", holderScript, url, runId], {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        stdio: ["ignore", "pipe", "inherit"]
      })
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
      child.once("exit", (code) => resume(Effect.die(new Error(`holder exited with ${code}`))))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

describe.skipIf(server === undefined)("PostgresLiveness", () => {
  it.live("options it cannot use: building the service dies with PostgresOptions.InvalidOption naming the option", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      const cases: ReadonlyArray<readonly [PostgresLiveness.Options, string]> = [
        [
          { heartbeatEvery: "soon" as never },
          'PostgresLiveness heartbeatEvery: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [{ heartbeatEvery: Number.NaN }, "PostgresLiveness heartbeatEvery: must be a number of milliseconds, got NaN"],
        [{ heartbeatEvery: 0 }, "PostgresLiveness heartbeatEvery: must be a positive, finite duration, got 0"],
        [
          { heartbeatEvery: { seconds: true } as never },
          "PostgresLiveness heartbeatEvery: duration field seconds must be a number, got boolean"
        ],
        [{ grace: Number.NaN }, "PostgresLiveness grace: must be a number of milliseconds, got NaN"],
        [{ grace: -1 }, "PostgresLiveness grace: must be a positive, finite duration, got -1"],
        [{ grace: 0 }, "PostgresLiveness grace: must be a positive, finite duration, got 0"],
        [
          { grace: { milliseconds: "5" } as never },
          "PostgresLiveness grace: duration field milliseconds must be a number, got string"
        ],
        [
          { grace: Number.POSITIVE_INFINITY },
          "PostgresLiveness grace: must be a positive, finite duration, got Infinity"
        ]
      ]
      for (const [options, message] of cases) {
        const exit = yield* Effect.scoped(machine(url, options)).pipe(Effect.timeout("5 seconds"), Effect.exit)
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.instanceOf(defect, PostgresOptions.InvalidOption, JSON.stringify(options))
        assert.strictEqual((defect as Error).message, message)
      }
    })
  )

  it.live(
    "another machine sees a held run alive, and dead once its coordinator is SIGKILLed (lock gone, heartbeat past the grace)",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const b = yield* machine(url, { grace: "1 second" })
        yield* b.ledger.startRun(start("r-killed"))
        const child = yield* holderProcess(url, "r-killed")
        const summaries = yield* b.ledger.listRuns()
        assert.deepStrictEqual([...(yield* b.liveness.alive(summaries))], ["r-killed"])
        assert.deepStrictEqual(yield* RunLiveness.markCrashed.pipe(Effect.provideContext(b.context)), [])
        child.kill("SIGKILL")
        yield* waitUntil(Effect.map(Effect.orDie(b.liveness.alive(summaries)), (alive) => alive.size === 0))
        assert.deepStrictEqual(yield* RunLiveness.markCrashed.pipe(Effect.provideContext(b.context)), ["r-killed"])
        const run = yield* b.ledger.getRun("r-killed")
        assert.strictEqual(run._tag === "Some" ? run.value.status : undefined, "crashed")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a run without a live coordinator row is dead; a run that stops holding is dead at once; a recorded pid of another host means nothing",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const a = yield* machine(url)
        const b = yield* machine(url)
        yield* b.ledger.startRun({ ...start("r-norow"), pid: process.pid, hostname: NodeOs.hostname() })
        const scope = yield* Scope.make()
        yield* a.liveness.hold({ runId: "r-held" }).pipe(Scope.provide(scope))
        yield* b.ledger.startRun(start("r-held"))
        const summaries = yield* b.ledger.listRuns()
        assert.deepStrictEqual([...(yield* b.liveness.alive(summaries))], ["r-held"])
        assert.deepStrictEqual(yield* RunLiveness.markCrashed.pipe(Effect.provideContext(b.context)), ["r-norow"])
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual((yield* b.liveness.alive(summaries)).size, 0)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a SIGKILLed coordinator's row is deleted by a registration once long dead; a live one's never is",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const b = yield* machine(url, { grace: "1 second" })
        const sql = yield* inspector(url)
        const rows = Effect.map(
          Effect.orDie(sql<{ run_id: string }>`SELECT run_id FROM corral_run_coordinators ORDER BY run_id`),
          (found) => found.map((row) => row.run_id)
        )
        // as if `minutes` had passed without a heartbeat (the check reads the database clock)
        const age = (runId: string, minutes: number) =>
          Effect.orDie(
            sql`UPDATE corral_run_coordinators SET heartbeat_at = heartbeat_at - ${minutes * 60_000} WHERE run_id = ${runId}`
          )
        const killed = yield* holderProcess(url, "r-killed")
        yield* holderProcess(url, "r-live")
        killed.kill("SIGKILL")
        const run = (runId: string) => ({ ...start(runId), pid: process.pid, hostname: NodeOs.hostname() })
        yield* waitUntil(Effect.map(Effect.orDie(b.liveness.alive([run("r-killed")])), (alive) => alive.size === 0))
        yield* age("r-killed", 0.5)
        yield* Effect.scoped(b.liveness.hold({ runId: "r-new-1" }))
        assert.deepStrictEqual(yield* rows, ["r-killed", "r-live"], "dead for half a minute: kept")
        yield* age("r-killed", 60)
        // a live coordinator (its lock held) that wrote no heartbeat for an hour, e.g. a stopped process
        yield* age("r-live", 60)
        yield* Effect.scoped(b.liveness.hold({ runId: "r-new-2" }))
        assert.deepStrictEqual(yield* rows, ["r-live"])
        assert.deepStrictEqual([...(yield* b.liveness.alive([run("r-live")]))], ["r-live"])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a live coordinator whose row was deleted as long dead (cut off from the server) writes it again and counts as alive",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const b = yield* machine(url, { grace: "1 second" })
        const sql = yield* inspector(url)
        yield* b.ledger.startRun(start("r-cut"))
        const child = yield* holderProcess(url, "r-cut")
        const summaries = yield* b.ledger.listRuns()
        // its session ends (the lock goes) and a registration deletes its row as long dead
        yield* Effect.orDie(sql`SELECT pg_terminate_backend(l.pid) FROM pg_locks l
          JOIN corral_run_coordinators c ON l.objid = c.id
          WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND c.run_id = 'r-cut'`)
        yield* Effect.orDie(sql`DELETE FROM corral_run_coordinators WHERE run_id = 'r-cut'`)
        yield* waitUntil(Effect.map(Effect.orDie(b.liveness.alive(summaries)), (alive) => alive.has("r-cut")))
        assert.deepStrictEqual(yield* RunLiveness.markCrashed.pipe(Effect.provideContext(b.context)), [])
        const rows = yield* Effect.orDie(
          sql<{
            lineage: string
            pid: number
            hostname: string
          }>`SELECT lineage, pid, hostname FROM corral_run_coordinators`
        )
        assert.deepStrictEqual(rows, [{ lineage: "r-cut", pid: child.pid!, hostname: NodeOs.hostname() }])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live("of two coordinators of one lineage, the second fails with LineageBusy until the first ends", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      const a = yield* machine(url)
      const b = yield* machine(url)
      const scope = yield* Scope.make()
      yield* a.liveness.hold({ runId: "r1", lineage: "r1" }).pipe(Scope.provide(scope))
      const busy = yield* Effect.flip(Effect.scoped(b.liveness.hold({ runId: "r2", lineage: "r1" })))
      assert.strictEqual(busy._tag, "LineageBusy")
      assert.match(busy.message, /run r1 of lineage r1 is still coordinated by pid \d+ on /)
      const first = yield* Effect.raceFirst(
        Effect.exit(Effect.scoped(Effect.andThen(a.liveness.hold({ runId: "r3", lineage: "l3" }), Effect.never))),
        Effect.exit(Effect.scoped(Effect.andThen(b.liveness.hold({ runId: "r4", lineage: "l3" }), Effect.never)))
      )
      // of two registrations racing for one lineage, one fails (the other holds until the race ends)
      assert.isTrue(Exit.isFailure(first))
      assert.match(String(Exit.isFailure(first) ? first.cause : ""), /LineageBusy|still coordinated/)
      yield* Scope.close(scope, Exit.void)
      yield* Effect.scoped(b.liveness.hold({ runId: "r2", lineage: "r1" }))
    }).pipe(Effect.scoped)
  )
})
