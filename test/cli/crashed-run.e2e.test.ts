import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { isAlive, makeRepo, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"

/**
 * A run whose coordinator is killed with kill -9 has no recorded end: `runs`, `status` and
 * `report` show its duration as a lower bound (its last sign of life), never as a measured time.
 */
describe("a crashed run's duration (end to end)", () => {
  it("runs, status and report show at least the last sign of life, before and after gc marks it crashed", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nagents:\n  - id: sleeper\n    run: echo $$ > ${side}/pid; exec sleep 300\n`
    )
    const first = startCli(["run", plan], { cwd: repo })
    const pidFile = NodePath.join(side, "pid")
    await waitFor(
      () => NodeFs.existsSync(pidFile) && NodeFs.readFileSync(pidFile, "utf8").trim() !== "",
      30_000,
      "the agent to write its pid"
    )
    const runsDir = NodePath.join(repo, ".corral", "runs")
    await waitFor(
      () =>
        NodeFs.existsSync(runsDir) &&
        NodeFs.readdirSync(runsDir).some((run) => NodeFs.existsSync(NodePath.join(runsDir, run, "pids", "sleeper"))),
      30_000,
      "corral to record the agent's process group"
    )
    const pid = Number(NodeFs.readFileSync(pidFile, "utf8"))
    first.signal("SIGKILL")
    await first.done

    const check = async (stage: string) => {
      const runs = await runCli(["runs"], { cwd: repo })
      expect(runs.code, runs.stderr).toBe(0)
      expect(runs.stdout, `${stage}: corral runs`).toMatch(/ crashed +\S+ \S+ +≥\d+\.\ds {2}0\/1 succeeded /)
      const status = await runCli(["status"], { cwd: repo })
      expect(status.code, status.stderr).toBe(0)
      expect(status.stdout, `${stage}: corral status`).toMatch(
        /: crashed[ ,].*, ran at least \d+\.\ds \(its last sign of life\)/
      )
      return status.stdout
    }
    await check("before gc")
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    await waitFor(() => !isAlive(pid), 10_000, "gc to stop the crashed run's agent")
    const status = await check("after gc")
    expect(status).toMatch(/sleeper +interrupted after at least \d+\.\ds, attempt 1 — crashed/)

    const out = tempDir("report-")
    const report = await runCli(
      ["report", "--html", NodePath.join(out, "r.html"), "--trace", NodePath.join(out, "t.json")],
      { cwd: repo }
    )
    expect(report.code, report.stderr).toBe(0)
    expect(NodeFs.readFileSync(NodePath.join(out, "r.html"), "utf8")).toMatch(
      /<span>wall time<\/span><span>at least \d+(\.\d)?m?s \(crashed; its last sign of life\)/
    )
    const trace = JSON.parse(NodeFs.readFileSync(NodePath.join(out, "t.json"), "utf8"))
    expect(trace.otherData.status).toBe("crashed")
    expect(trace.otherData.wallMsIs).toBe("at least")
    for (const dir of [repo, side, out]) NodeFs.rmSync(dir, { recursive: true, force: true })
  }, 120_000)
})
