import { spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as RunLedger from "../src/RunLedger.ts"
import * as RunLiveness from "../src/RunLiveness.ts"
import { Workspace } from "../src/Workspace.ts"

/** The pid of a process that has exited. */
const deadPid = (): number => {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" })
  return Number(child.stdout)
}

const start = (runId: string, pid: number, hostname: string) => ({
  runId,
  planFile: "plan.yaml",
  planHash: "h",
  options: {},
  pid,
  hostname,
  startedAt: 1,
  agents: [{ agentId: "a", dependsOn: [] }]
})

describe("RunLiveness", () => {
  it.effect(
    "layerPid: this host's pids are checked, other hosts' count as alive; markCrashed marks only the dead",
    () =>
      Effect.gen(function* () {
        const ledger = yield* RunLedger.RunLedger
        const liveness = yield* RunLiveness.RunLiveness
        yield* ledger.startRun(start("live", process.pid, NodeOs.hostname()))
        yield* ledger.startRun(start("dead", deadPid(), NodeOs.hostname()))
        yield* ledger.startRun(start("elsewhere", 1, `${NodeOs.hostname()}-other`))
        const runs = yield* ledger.listRuns()
        const alive = yield* liveness.alive(runs)
        assert.deepStrictEqual([...alive].sort(), ["elsewhere", "live"])
        assert.strictEqual(RunLiveness.statusOf({ runId: "dead", status: "running" }, alive), "crashed")
        assert.strictEqual(RunLiveness.statusOf({ runId: "live", status: "running" }, alive), "running")
        assert.strictEqual(RunLiveness.statusOf({ runId: "dead", status: "succeeded" }, alive), "succeeded")
        assert.deepStrictEqual(yield* RunLiveness.markCrashed, ["dead"])
        const statuses = Object.fromEntries((yield* ledger.listRuns()).map((run) => [run.runId, run.status]))
        assert.deepStrictEqual(statuses, { live: "running", dead: "crashed", elsewhere: "running" })
        yield* Effect.scoped(liveness.hold({ runId: "live", lineage: "live" }))
      }).pipe(Effect.provide(Layer.merge(RunLedger.layerMemory, RunLiveness.layerPid)))
  )

  it.live("layerLease: a run's lease decides where it has one, the pid rule where it has none", () =>
    Effect.gen(function* () {
      const repo = yield* Effect.acquireRelease(
        Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-liveness-"))),
        (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
      )
      const runs = NodePath.join(repo, ".corral", "runs")
      NodeFs.mkdirSync(runs, { recursive: true })
      const now = Date.now()
      const lease = (runId: string, pid: number, hostname: string, heartbeatAt: number) =>
        NodeFs.writeFileSync(
          NodePath.join(runs, `${runId}.json`),
          JSON.stringify({ pid, hostname, startedAt: heartbeatAt, heartbeatAt })
        )
      const here = NodeOs.hostname()
      const other = `${here}-other`
      lease("live-lease", process.pid, here, now)
      lease("dead-lease", deadPid(), here, now)
      lease("fresh-elsewhere", 1, other, now)
      lease("stale-elsewhere", 1, other, now - 3_600_000)
      const recorded = [
        { runId: "live-lease", pid: deadPid(), hostname: here },
        { runId: "dead-lease", pid: process.pid, hostname: here },
        { runId: "fresh-elsewhere", pid: 1, hostname: other },
        { runId: "stale-elsewhere", pid: 1, hostname: other },
        { runId: "no-lease-live", pid: process.pid, hostname: here },
        { runId: "no-lease-dead", pid: deadPid(), hostname: here },
        { runId: "no-lease-elsewhere", pid: 1, hostname: other }
      ]
      const alive = yield* Effect.gen(function* () {
        return yield* (yield* RunLiveness.RunLiveness).alive(recorded)
      }).pipe(Effect.provide(RunLiveness.layerLease(repo)))
      assert.deepStrictEqual([...alive].sort(), [
        "fresh-elsewhere",
        "live-lease",
        "no-lease-elsewhere",
        "no-lease-live"
      ])
    }).pipe(Effect.scoped)
  )

  it.live.skipIf(process.platform !== "linux")(
    "layerLease: a lease whose pid now names a process started at another time is dead (a reused pid)",
    () =>
      Effect.gen(function* () {
        const repo = yield* Effect.acquireRelease(
          Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-liveness-"))),
          (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
        )
        yield* (yield* Workspace).registerRun(repo, "registered")
        const runs = NodePath.join(repo, ".corral", "runs")
        const written = JSON.parse(NodeFs.readFileSync(NodePath.join(runs, "registered.json"), "utf8"))
        const otherStart = { ...written, processStart: `${written.processStart}0` }
        NodeFs.writeFileSync(NodePath.join(runs, "reused.json"), JSON.stringify(otherStart))
        const recorded = ["registered", "reused"].map((runId) => ({
          runId,
          pid: process.pid,
          hostname: NodeOs.hostname()
        }))
        const alive = yield* Effect.gen(function* () {
          return yield* (yield* RunLiveness.RunLiveness).alive(recorded)
        }).pipe(Effect.provide(RunLiveness.layerLease(repo)))
        assert.deepStrictEqual([...alive], ["registered"])
      }).pipe(Effect.scoped, Effect.provide(Workspace.layer))
  )
})
