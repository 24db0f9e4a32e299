import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Agent, Corral } from "@corral/core"
import { Effect, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { SqlClient } from "effect/sql"
import * as RunLedger from "../src/RunLedger.ts"
import * as SqliteClient from "../src/SqliteClient.ts"
import {
  recordAll,
  runLedgerContract,
  spans,
  start,
  succeeded,
  syntheticRun,
  ev
} from "./contracts/RunLedgerContract.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-ledger-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => join(dir, `ledger-${files++}.db`)

runLedgerContract("memory", () => RunLedger.layerMemory)
runLedgerContract("sqlite", () => RunLedger.layerSqlite(freshFile()))
runLedgerContract("sqlite, no writer thread", () => RunLedger.layerSqlite(freshFile(), { writerThread: false }))

/** Run `r1` started in the ledger: `a` done at once, `b` an hour long, `c` after `b`. */
const startedRun = Effect.gen(function* () {
  const ledger = yield* RunLedger.RunLedger
  yield* ledger.startRun({
    ...start("r1", 0),
    agents: [
      { agentId: "a", dependsOn: [] },
      { agentId: "b", dependsOn: [] },
      { agentId: "c", dependsOn: ["b"] }
    ]
  })
  const agents = [
    Agent.make("a", { run: Effect.succeed(1) }),
    Agent.make("b", { run: Effect.sleep("1 hour") }),
    Agent.make("c", { run: Effect.void, dependsOn: ["b"] })
  ]
  return { ledger, agents }
})

describe("RunLedger (SQLite)", () => {
  it.effect("writer options it cannot use: opening fails with a RunLedgerError naming the option", () =>
    Effect.gen(function* () {
      const cases = [
        [
          { flushEvery: "abc" as never },
          'RunLedger flushEvery: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "abc"'
        ],
        [{ flushEvery: 0 }, "RunLedger flushEvery: must be a positive, finite duration, got 0"],
        [{ flushSoon: -1 }, "RunLedger flushSoon: must not be negative, got -1"],
        [
          { flushEvery: { seconds: true } as never },
          "RunLedger flushEvery: duration field seconds must be a number, got boolean"
        ],
        [
          { flushSoon: { milliseconds: "5" } as never },
          "RunLedger flushSoon: duration field milliseconds must be a number, got string"
        ],
        [
          { flushEvery: {} },
          'RunLedger flushEvery: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}'
        ],
        [{ maxBuffered: Number.NaN }, "RunLedger maxBuffered: must be a whole number of at least 1, got NaN"]
      ] as const
      for (const [options, message] of cases) {
        const opened = Effect.scoped(Layer.build(RunLedger.layerSqlite(freshFile(), options)))
        const error = yield* Effect.flip(opened)
        assert.strictEqual(error._tag, "RunLedgerError")
        assert.strictEqual(error.operation, "options")
        assert.strictEqual(error.message, message)
        const inMemory = yield* Effect.flip(
          Effect.scoped(Layer.build(RunLedger.layerSql(options))).pipe(
            Effect.provide(SqliteClient.layer({ filename: ":memory:" }))
          )
        )
        assert.strictEqual(inMemory.message, message)
      }
    })
  )

  it.effect("after a long idle time, a write is committed within flushEvery (the idle writer waits for it)", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const reader = RunLedger.layerSqlite(filename, { writerThread: false })
      const stateOfA = Effect.flatMap(Effect.service(RunLedger.RunLedger), (ledger) => ledger.getRun("r1")).pipe(
        Effect.map((run) => Option.getOrThrow(run).agents.find((agent) => agent.agentId === "a")?.state),
        Effect.provide(reader, { local: true })
      )
      yield* Effect.gen(function* () {
        const { ledger } = yield* startedRun
        yield* ledger.record("r1", ev("r1", 0, { _tag: "RunStarted", concurrency: 2, mode: "settle" }))
        yield* ledger.record("r1", ev("r1", 0, { _tag: "Queued", agentId: "a" }))
        yield* TestClock.adjust("10 minutes")
        assert.strictEqual(yield* stateOfA, "pending")
        yield* ledger.record("r1", ev("r1", 1, { _tag: "Started", agentId: "a" }))
        yield* TestClock.adjust("49 millis")
        assert.strictEqual(yield* stateOfA, "pending", "not committed before flushEvery")
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(yield* stateOfA, "running")
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename, { writerThread: false, flushEvery: 50 }), { local: true }))
    })
  )

  it.effect("records a run that Effect.timeout interrupted as ended: interrupted, its agents with their outcomes", () =>
    Effect.gen(function* () {
      const { ledger, agents } = yield* startedRun
      const run = Corral.run(agents, { runId: "r1", onEvent: (event) => ledger.record("r1", event) })
      const fiber = yield* Effect.forkChild(Effect.timeoutOption(run, "1 minute"), { startImmediately: true })
      yield* TestClock.adjust("1 minute")
      assert.isTrue(Option.isNone(yield* Fiber.join(fiber)))
      const recorded = Option.getOrThrow(yield* ledger.getRun("r1"))
      assert.strictEqual(recorded.status, "interrupted")
      assert.deepStrictEqual(
        recorded.agents.map((agent) => [agent.agentId, agent.outcome]),
        [
          ["a", "Succeeded"],
          ["b", "Interrupted"],
          ["c", "Cancelled"]
        ]
      )
    }).pipe(Effect.provide(RunLedger.layerSqlite(freshFile(), { writerThread: false }), { local: true }))
  )

  it.effect("a subscriber slower than the interrupted run's grace: the ledger records the end when it closes", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const stalled = Effect.gen(function* () {
        const { ledger, agents } = yield* startedRun
        // The writer stalls (2 s) from the interruption on: the run's 1 s grace ends first.
        const onEvent = (event: { readonly _tag: string }) =>
          event._tag === "Stopping"
            ? Effect.andThen(Effect.sleep("2 seconds"), ledger.record("r1", event as RunLedger.LedgerEvent))
            : ledger.record("r1", event as RunLedger.LedgerEvent)
        const run = Corral.run(agents, { runId: "r1", onEvent })
        const fiber = yield* Effect.forkChild(Effect.timeoutOption(run, "1 minute"), { startImmediately: true })
        yield* TestClock.adjust("1 minute")
        yield* TestClock.adjust("1 second")
        assert.isTrue(Option.isNone(yield* Fiber.join(fiber)))
        const meanwhile = Option.getOrThrow(yield* ledger.getRun("r1"))
        assert.strictEqual(meanwhile.status, "running", "the subscriber did not deliver the end")
      })
      yield* stalled.pipe(Effect.provide(RunLedger.layerSqlite(filename, { writerThread: false }), { local: true }))
      const recorded = yield* Effect.flatMap(Effect.service(RunLedger.RunLedger), (ledger) => ledger.getRun("r1")).pipe(
        Effect.map(Option.getOrThrow),
        Effect.provide(RunLedger.layerSqlite(filename), { local: true })
      )
      assert.strictEqual(recorded.status, "interrupted")
      assert.isNotNull(recorded.endedAt)
      assert.deepStrictEqual(
        recorded.agents.map((agent) => [agent.agentId, agent.outcome]),
        [
          ["a", "Succeeded"],
          ["b", "Interrupted"],
          ["c", "Cancelled"]
        ]
      )
    })
  )

  it.effect("reads transitions stored one row each (before transition batches) ahead of later ones", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      yield* Effect.flatMap(Effect.service(RunLedger.RunLedger), (ledger) => ledger.startRun(start("r1", 0))).pipe(
        Effect.provide(RunLedger.layerSqlite(filename), { local: true })
      )
      yield* Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql`INSERT INTO transitions (run_id, agent_id, at, tag, note, data)
          VALUES ('r1', 'a', 0, 'Queued', NULL, NULL), ('r1', 'a', 10, 'Started', NULL, NULL)`
      ).pipe(Effect.provide(SqliteClient.layer({ filename }), { local: true }))
      yield* Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        yield* ledger.record("r1", ev("r1", 30, { _tag: "Finished", agentId: "a", outcome: succeeded("a", 10, 30, 1) }))
        const run = Option.getOrThrow(yield* ledger.getRun("r1"))
        assert.deepStrictEqual(spans(run.agents[0]!), ["queued 0-10", "running 10-30 attempt 1"])
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
    })
  )

  it.effect("commits every write when the buffer fills faster than its writer thread commits", () =>
    Effect.gen(function* () {
      const record = (options: RunLedger.WriterOptions) =>
        Effect.gen(function* () {
          const ledger = yield* RunLedger.RunLedger
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          return [Option.getOrThrow(yield* ledger.getRun("r1")), yield* ledger.stats] as const
        }).pipe(Effect.provide(RunLedger.layerSqlite(freshFile(), options), { local: true }))
      const [expected] = yield* record({})
      const [run, stats] = yield* record({ maxBuffered: 1 })
      assert.deepStrictEqual(run, expected)
      assert.isAbove(stats.transactions, 2)
    })
  )

  it.effect("keeps runs across reopening and creates its schema with versioned migrations", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      yield* Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        yield* ledger.startRun(start("r1", 0))
        yield* recordAll(ledger, "r1", syntheticRun("r1").slice(0, 8))
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
      yield* Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        const run = Option.getOrThrow(yield* ledger.getRun("r1"))
        // The first ledger closed before the run's end reached it: it recorded the run interrupted.
        assert.strictEqual(run.status, "interrupted")
        assert.deepStrictEqual(
          run.agents.map((a) => a.outcome),
          ["Succeeded", "Interrupted", "Cancelled", "Cancelled"]
        )
        yield* recordAll(ledger, "r1", syntheticRun("r1").slice(8))
        assert.deepStrictEqual(Option.getOrThrow(yield* ledger.getRun("r1")).criticalPath, ["a", "c", "d"])
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
      const migrations = yield* Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql<{ name: string }>`SELECT name FROM corral_ledger_migrations ORDER BY migration_id`
      ).pipe(Effect.provide(SqliteClient.layer({ filename }), { local: true }))
      assert.deepStrictEqual(
        migrations.map((m) => m.name),
        [
          "create_runs",
          "create_agents",
          "create_transitions",
          "create_successes",
          "create_transition_batches",
          "forget_discarded_successes"
        ]
      )
    })
  )

  it.effect("migration 6 forgets the successes of runs discarded before discard forgot them itself", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      yield* Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        yield* ledger.startRun(start("gone", 0))
        yield* recordAll(ledger, "gone", syntheticRun("gone"))
        yield* ledger.finishRun("gone", "discarded", 130)
        yield* ledger.startRun({
          ...start("kept", 200),
          agents: [{ agentId: "x", dependsOn: [], idempotencyKey: "kx" }]
        })
        yield* ledger.record(
          "kept",
          ev("kept", 210, { _tag: "Finished", agentId: "x", outcome: succeeded("x", 200, 210, 7) })
        )
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
      yield* Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) => sql`DELETE FROM corral_ledger_migrations WHERE name = 'forget_discarded_successes'`
      ).pipe(Effect.provide(SqliteClient.layer({ filename }), { local: true }))
      yield* Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        assert.isTrue(Option.isNone(yield* ledger.cachedSuccess("ka")))
        assert.strictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("kx")).runId, "kept")
      }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
    })
  )
})
