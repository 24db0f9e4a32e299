import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import * as RunLedger from "../src/RunLedger.ts"
import * as SqliteClient from "../src/SqliteClient.ts"
import { isAlive } from "./support/processes.ts"
import { mulberry32 } from "../../../test/support/random.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-ledger-crash-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const moduleUrl = (specifier: string): string => pathToFileURL(createRequire(import.meta.url).resolve(specifier)).href
const srcUrl = (path: string): string => pathToFileURL(fileURLToPath(new URL(path, import.meta.url))).href

const writerScript = `
import { Effect } from ${JSON.stringify(moduleUrl("effect"))}
import { Outcome, Usage } from ${JSON.stringify(srcUrl("../../core/src/index.ts"))}
import * as RunLedger from ${JSON.stringify(srcUrl("../src/RunLedger.ts"))}

const [filename, seed, writer] = process.argv.slice(2)
const agents = 200
const progress = { total: agents, pending: 0, waiting: 0, running: 0, done: 0, succeeded: 0, failed: 0, timedOut: 0, interrupted: 0, cancelled: 0, skipped: 0 }
const common = (agentId, at) => ({ agentId, attempts: 1, queuedAt: at, startedAt: at, endedAt: at, waitedMs: 0, usage: Usage.zero })

const oneRun = (ledger, n) => Effect.gen(function*() {
  const runId = "run-" + seed + "-" + n
  const ids = Array.from({ length: agents }, (_, i) => "a" + i)
  yield* ledger.startRun({ runId, planFile: "p.yaml", planHash: "h", options: {}, pid: process.pid, hostname: "host",
    startedAt: Date.now(), agents: ids.map((agentId, i) => ({ agentId, dependsOn: i === 0 ? [] : ["a" + (i - 1)], idempotencyKey: "k" + i })) })
  console.log("started " + runId)
  const ev = (fields) => ledger.record(runId, { runId, at: Date.now(), progress, ...fields })
  for (const agentId of ids) yield* ev({ _tag: "Queued", agentId })
  for (const [i, agentId] of ids.entries()) {
    yield* ev({ _tag: "Started", agentId })
    if (i % 7 === 0) yield* ev({ _tag: "Retrying", agentId, attempt: 2 })
    const outcome = i % 11 === 0
      ? new Outcome.Failed({ ...common(agentId, Date.now()), error: "e", defect: false, message: "boom" })
      : new Outcome.Succeeded({ ...common(agentId, Date.now()), value: { i }, cached: false })
    yield* ev({ _tag: "Finished", agentId, outcome })
    if (i % 5 === 0) yield* Effect.sleep("1 millis")
  }
  yield* ev({ _tag: "RunFinished", stopped: undefined })
})

const program = Effect.gen(function*() {
  const ledger = yield* RunLedger.RunLedger
  for (let n = 0; ; n++) yield* oneRun(ledger, n)
})
Effect.runPromise(program.pipe(Effect.provide(RunLedger.layerSqlite(filename, { writerThread: writer === "thread" })))).catch((error) => {
  console.error(String(error))
  process.exit(1)
})
`

const killAfter = (script: string, filename: string, seed: number, delayMs: number, writer: "thread" | "inline") =>
  Effect.callback<{ readonly stderr: string; readonly started: number }>((resume) => {
    const child = spawn(process.execPath, [script, filename, String(seed), writer], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    let started = 0
    let timer: NodeJS.Timeout | undefined
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.stdout.on("data", (chunk) => {
      started += String(chunk).split("started").length - 1
      timer ??= setTimeout(() => child.kill("SIGKILL"), delayMs)
    })
    child.on("close", () => resume(Effect.succeed({ stderr, started })))
    return Effect.sync(() => {
      if (timer !== undefined) clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

interface AgentRow {
  readonly run_id: string
  readonly state: string
  readonly outcome: string | null
  readonly started_at: number | null
  readonly ended_at: number | null
}

const invalid = (row: AgentRow): boolean =>
  !["pending", "queued", "waiting", "running", "done"].includes(row.state) ||
  (row.state === "done") !== (row.outcome !== null) ||
  (row.state === "done" && row.ended_at === null) ||
  (row.state === "running" && row.started_at === null)

describe("RunLedger crash consistency", () => {
  for (const writer of ["thread", "inline"] as const)
    it.live(
      `a writer (commits on ${writer === "thread" ? "a writer thread" : "the calling thread"}) killed with SIGKILL at 5 random points leaves a ledger where every agent is in a valid state`,
      () =>
        Effect.gen(function* () {
          const script = join(dir, "ledger-writer.mjs")
          writeFileSync(script, writerScript)
          const filename = join(dir, `ledger-${writer}.db`)
          const random = mulberry32(20260101)
          for (let seed = 0; seed < 5; seed++) {
            const result = yield* killAfter(script, filename, seed, 20 + Math.floor(random() * 400), writer)
            assert.strictEqual(result.stderr, "")
          }
          yield* Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            assert.deepStrictEqual(yield* sql`PRAGMA integrity_check`, [{ integrity_check: "ok" }])
            const rows = yield* sql<AgentRow>`SELECT run_id, state, outcome, started_at, ended_at FROM agents`
            assert.deepStrictEqual(rows.filter(invalid), [])
            const perRun = yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM agents GROUP BY run_id`
            assert.isTrue(perRun.length >= 5)
            assert.isTrue(
              perRun.every((run) => run.n === 200),
              "a run's agents are recorded all at once"
            )
          }).pipe(Effect.provide(SqliteClient.layer({ filename }), { local: true }))
          yield* Effect.gen(function* () {
            const ledger = yield* RunLedger.RunLedger
            const crashed = yield* ledger.markCrashed((pid) => isAlive(pid))
            const runs = yield* ledger.listRuns()
            assert.isAtLeast(crashed.length, 1, "killed runs that were still running are marked crashed")
            for (const summary of runs) {
              assert.include(["succeeded", "failed", "crashed"], summary.status)
              const run = Option.getOrThrow(yield* ledger.getRun(summary.runId))
              assert.isTrue(run.agents.every((agent) => agent.outcome !== null))
              if (run.status === "crashed")
                for (const agent of run.agents)
                  assert.isAtLeast(
                    run.endedAt!,
                    Math.max(agent.queuedAt ?? 0, agent.startedAt ?? 0),
                    `a crashed run ends at its last sign of life, not before ${agent.agentId} started`
                  )
            }
          }).pipe(Effect.provide(RunLedger.layerSqlite(filename), { local: true }))
        }),
      60_000
    )
})
