import { spawnSync } from "node:child_process"
import * as NodeOs from "node:os"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as RunLedger from "../src/RunLedger.ts"
import * as RunLiveness from "../src/RunLiveness.ts"

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
})
