import { type CorralEvent, Ledger, Outcome, Usage } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as RunLedger from "../../src/RunLedger.ts"
import type * as RunRecord from "../../src/RunRecord.ts"

const progress: CorralEvent.Progress = {
  total: 4,
  pending: 0,
  waiting: 0,
  running: 0,
  done: 0,
  succeeded: 3,
  failed: 1,
  timedOut: 0,
  interrupted: 0,
  cancelled: 0,
  skipped: 0
}

export const common = (agentId: string, startedAt: number, endedAt: number, attempts = 1) => ({
  agentId,
  attempts,
  queuedAt: 0,
  startedAt,
  endedAt,
  waitedMs: 0,
  usage: { ...Usage.zero, inputTokens: 10, outputTokens: 5, costUsd: 0.01 }
})

export const succeeded = (
  agentId: string,
  startedAt: number,
  endedAt: number,
  value: unknown,
  attempts = 1,
  cached = false
) => new Outcome.Succeeded({ ...common(agentId, startedAt, endedAt, attempts), value, cached })

export const ev = (runId: string, at: number, fields: Record<string, unknown>) =>
  ({ runId, at, progress, ...fields }) as unknown as RunLedger.LedgerEvent

export const start = (runId: string, startedAt: number, pid = process.pid): RunLedger.RunStart => ({
  runId,
  planFile: "plan.yaml",
  planHash: "h1",
  options: { concurrency: 2 },
  pid,
  hostname: "host",
  startedAt,
  agents: [
    { agentId: "a", dependsOn: [], idempotencyKey: "ka" },
    { agentId: "b", dependsOn: ["a"], idempotencyKey: "kb" },
    { agentId: "c", dependsOn: ["a"], idempotencyKey: "kc" },
    { agentId: "d", dependsOn: ["b", "c"] }
  ]
})

const blocker = { _tag: "Key", key: "src/", mode: "write", holder: { runId: "other", agentId: "x" }, leaseId: 7 }

export const syntheticRun = (runId: string): ReadonlyArray<RunLedger.LedgerEvent> => [
  ev(runId, 0, { _tag: "RunStarted", concurrency: 2, mode: "settle" }),
  ...["a", "b", "c", "d"].map((agentId) => ev(runId, 0, { _tag: "Queued", agentId })),
  ev(runId, 10, { _tag: "Started", agentId: "a" }),
  ev(runId, 30, { _tag: "Finished", agentId: "a", outcome: succeeded("a", 10, 30, { n: 1 }) }),
  ev(runId, 30, { _tag: "Started", agentId: "b" }),
  ev(runId, 30, { _tag: "WaitingForClaims", agentId: "c", blockers: [blocker] }),
  ev(runId, 40, { _tag: "ClaimsAcquired", agentId: "c", fencingToken: 3 }),
  ev(runId, 40, { _tag: "Started", agentId: "c" }),
  ev(runId, 50, { _tag: "Retrying", agentId: "b", attempt: 2, message: "flaky" }),
  ev(runId, 80, { _tag: "Finished", agentId: "b", outcome: succeeded("b", 30, 80, [1, 2], 2) }),
  ev(runId, 100, { _tag: "Finished", agentId: "c", outcome: succeeded("c", 40, 100, "c") }),
  ev(runId, 100, { _tag: "Started", agentId: "d" }),
  ev(runId, 110, {
    _tag: "Finished",
    agentId: "d",
    outcome: new Outcome.Failed({ ...common("d", 100, 110), error: "boom", defect: false, message: "boom" })
  }),
  { _tag: "Merged", agentId: "a", at: 112, branch: "corral/a", message: "fast-forward" },
  { _tag: "WorkspaceReady", agentId: "b", at: 113, logPath: "/logs/b.log" },
  ev(runId, 120, { _tag: "RunFinished", stopped: undefined })
]

export const recordAll = (ledger: RunLedger.Service, runId: string, events: ReadonlyArray<RunLedger.LedgerEvent>) =>
  Effect.forEach(events, (event) => ledger.record(runId, event), { discard: true })

export const spans = (agent: RunRecord.AgentRecord) =>
  agent.spans.map((s) => `${s.kind} ${s.start}-${s.end}${s.note === undefined ? "" : ` ${s.note}`}`)

/**
 * The behaviour every RunLedger implementation must have (memory, SQLite, Postgres).
 */
export const runLedgerContract = (
  name: string,
  layer: () => Layer.Layer<RunLedger.RunLedger, RunLedger.RunLedgerError>
) =>
  describe(`RunLedger contract: ${name}`, () => {
    const withLedger = <A, E>(f: (ledger: RunLedger.Service) => Effect.Effect<A, E>) =>
      Effect.flatMap(Effect.service(RunLedger.RunLedger), f).pipe(Effect.provide(layer(), { local: true }))

    it.effect("derives states, spans, failures and the critical path from the events", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          const run = Option.getOrThrow(yield* ledger.getRun("r1"))
          assert.strictEqual(run.status, "failed")
          assert.strictEqual(run.endedAt, 120)
          assert.deepStrictEqual(run.criticalPath, ["a", "c", "d"])
          const [a, b, c, d] = run.agents
          assert.deepStrictEqual(spans(a!), ["queued 0-10", "running 10-30 attempt 1"])
          assert.deepStrictEqual(spans(b!), ["waiting-deps 0-30", "running 30-50 attempt 1", "running 50-80 attempt 2"])
          assert.deepStrictEqual(spans(c!), [
            "waiting-deps 0-30",
            "waiting-claims 30-40 src/ (write, held by x)",
            "running 40-100 attempt 1"
          ])
          assert.deepStrictEqual(spans(d!), ["waiting-deps 0-100", "running 100-110 attempt 1"])
          assert.deepStrictEqual(b!.failures, [{ at: 50, attempt: 1, message: "flaky" }])
          assert.deepStrictEqual(d!.failures, [{ at: 110, attempt: 1, message: "boom" }])
          assert.deepStrictEqual(
            run.agents.map((x) => [x.agentId, x.outcome, x.attempts, x.detail]),
            [
              ["a", "Succeeded", 1, ""],
              ["b", "Succeeded", 2, ""],
              ["c", "Succeeded", 1, ""],
              ["d", "Failed", 1, "boom"]
            ]
          )
          assert.deepStrictEqual(
            [a!.branch, a!.merge, b!.logPath, a!.tokens, a!.costUsd],
            ["corral/a", "merged", "/logs/b.log", 15, 0.01]
          )
          assert.deepStrictEqual([d!.dependsOn, a!.idempotencyKey, d!.idempotencyKey], [["b", "c"], "ka", null])
        })
      )
    )

    it.effect("lists runs newest first and finds the latest unfinished run of a plan", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          yield* ledger.finishRun("r1", "failed", 125)
          assert.isTrue(Option.isNone(yield* ledger.latestUnfinished("h1")))
          yield* ledger.startRun(start("r2", 200))
          yield* ledger.record("r2", ev("r2", 201, { _tag: "Started", agentId: "a" }))
          const runs = yield* ledger.listRuns()
          assert.deepStrictEqual(
            runs.map((r) => [r.runId, r.status, r.total, r.done, r.succeeded, r.failed, r.endedAt]),
            [
              ["r2", "running", 4, 0, 0, 0, null],
              ["r1", "failed", 4, 4, 3, 1, 125]
            ]
          )
          assert.deepStrictEqual(runs[0]!.options, { concurrency: 2 })
          assert.strictEqual(Option.getOrThrow(yield* ledger.latestUnfinished("h1")).runId, "r2")
          assert.isTrue(Option.isNone(yield* ledger.latestUnfinished("other")))
        })
      )
    )

    it.effect("returns the latest success by idempotency key, from any run", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          const hit = Option.getOrThrow(yield* ledger.cachedSuccess("ka"))
          assert.deepStrictEqual(hit, { value: { n: 1 }, runId: "r1", agentId: "a", recordedAt: 30 })
          assert.deepStrictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("kb")).value, [1, 2])
          assert.isTrue(Option.isNone(yield* ledger.cachedSuccess("missing")))
          yield* ledger.startRun(start("r2", 200))
          yield* ledger.record(
            "r2",
            ev("r2", 210, { _tag: "Finished", agentId: "a", outcome: succeeded("a", 0, 210, "x", 1, true) })
          )
          yield* ledger.record(
            "r2",
            ev("r2", 220, { _tag: "Finished", agentId: "b", outcome: succeeded("b", 0, 220, undefined) })
          )
          yield* ledger.record(
            "r2",
            ev("r2", 230, { _tag: "Finished", agentId: "c", outcome: succeeded("c", 0, 230, new Map()) })
          )
          assert.strictEqual(
            Option.getOrThrow(yield* ledger.cachedSuccess("ka")).runId,
            "r1",
            "cached reuse is not a new success"
          )
          const b = Option.getOrThrow(yield* ledger.cachedSuccess("kb"))
          assert.deepStrictEqual([b.runId, b.value], ["r2", undefined])
          assert.strictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("kc")).value, "c", "a Map is not JSON data")
          const r2 = Option.getOrThrow(yield* ledger.getRun("r2"))
          assert.strictEqual(r2.agents[0]!.outcome, "Cached")
        })
      )
    )

    it.effect("forgets the successes one run recorded, buffered ones included, and no other run's", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          yield* ledger.startRun({
            ...start("r2", 200),
            agents: [{ agentId: "x", dependsOn: [], idempotencyKey: "kx" }]
          })
          yield* ledger.record(
            "r2",
            ev("r2", 210, { _tag: "Finished", agentId: "x", outcome: succeeded("x", 200, 210, 7) })
          )
          yield* ledger.recordSuccess("core", "y", 8, 220)
          assert.strictEqual(yield* ledger.forgetSuccesses("r2"), 1)
          assert.isTrue(Option.isNone(yield* ledger.cachedSuccess("kx")))
          assert.strictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("ka")).runId, "r1")
          assert.strictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("core")).value, 8)
          assert.strictEqual(yield* ledger.forgetSuccesses("r1"), 3)
          assert.isTrue(Option.isNone(yield* ledger.cachedSuccess("ka")))
          assert.strictEqual(yield* ledger.forgetSuccesses("r1"), 0)
          assert.strictEqual(Option.getOrThrow(yield* ledger.cachedSuccess("core")).value, 8)
        })
      )
    )

    it.effect("marks runs of dead processes as crashed and their running agents as interrupted", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", syntheticRun("r1"))
          yield* ledger.startRun(start("dead", 100, 999_999))
          yield* ledger.record("dead", ev("dead", 101, { _tag: "Started", agentId: "a" }))
          yield* ledger.record(
            "dead",
            ev("dead", 102, { _tag: "Finished", agentId: "a", outcome: succeeded("a", 101, 102, 1) })
          )
          yield* ledger.record("dead", ev("dead", 103, { _tag: "Started", agentId: "b" }))
          yield* ledger.startRun(start("alive", 100))
          const crashed = yield* ledger.markCrashed((pid) => pid !== 999_999)
          assert.deepStrictEqual(crashed, ["dead"])
          const run = Option.getOrThrow(yield* ledger.getRun("dead"))
          assert.strictEqual(run.status, "crashed")
          assert.deepStrictEqual(
            run.agents.map((a) => [a.agentId, a.outcome, a.detail]),
            [
              ["a", "Succeeded", ""],
              ["b", "Interrupted", "crashed"],
              ["c", "Interrupted", "crashed"],
              ["d", "Interrupted", "crashed"]
            ]
          )
          assert.strictEqual(Option.getOrThrow(yield* ledger.getRun("alive")).status, "running")
          assert.strictEqual(Option.getOrThrow(yield* ledger.getRun("r1")).status, "failed")
          assert.deepStrictEqual(yield* ledger.markCrashed(() => false), ["alive"])
        })
      )
    )

    it.effect(
      "reads the agents a cluster coordinator left running, with their runners (ids only as recorded before)",
      () =>
        withLedger((ledger) =>
          Effect.gen(function* () {
            yield* ledger.startRun(start("r1", 0))
            assert.strictEqual(Option.getOrThrow(yield* ledger.getRun("r1")).leftRunning, undefined)
            yield* ledger.record("r1", { _tag: "RunnersStillRunning", at: 5, agents: ["a", "b"], reason: "bound" })
            assert.deepStrictEqual(Option.getOrThrow(yield* ledger.getRun("r1")).leftRunning, [
              { agentId: "a", runner: undefined },
              { agentId: "b", runner: undefined }
            ])
            yield* ledger.record("r1", {
              _tag: "RunnersStillRunning",
              at: 6,
              agents: ["a", "b"],
              running: [
                { agent: "a", runner: "10.0.0.5:4001" },
                { agent: "b", runner: null }
              ],
              reason: "stopped again"
            })
            assert.deepStrictEqual(Option.getOrThrow(yield* ledger.getRun("r1")).leftRunning, [
              { agentId: "a", runner: "10.0.0.5:4001" },
              { agentId: "b", runner: undefined }
            ])
          })
        )
    )

    it.effect("rejects unknown and duplicate runs", () =>
      withLedger((ledger) =>
        Effect.gen(function* () {
          const unknown = yield* Effect.flip(ledger.record("nope", ev("nope", 1, { _tag: "Started", agentId: "a" })))
          assert.strictEqual(unknown._tag, "RunLedgerError")
          yield* ledger.startRun(start("r1", 0))
          const twice = yield* Effect.flip(ledger.startRun(start("r1", 0)))
          assert.match(twice.message, /already recorded/)
          assert.isTrue(Option.isNone(yield* ledger.getRun("nope")))
        })
      )
    )

    it.effect("serves core's idempotency Ledger", () =>
      Effect.gen(function* () {
        const ledger = yield* Ledger.Ledger
        yield* ledger.record("k1", succeeded("a", 0, 5, { ok: true }))
        const entry = Option.getOrThrow(yield* ledger.lookup("k1"))
        assert.deepStrictEqual(entry, { agentId: "a", value: { ok: true }, recordedAt: 5 })
        assert.isTrue(Option.isNone(yield* ledger.lookup("k2")))
      }).pipe(Effect.provide(RunLedger.asCoreLedger.pipe(Layer.provide(layer())), { local: true }))
    )
  })
