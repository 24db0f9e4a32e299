import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import {
  branches,
  isAlive,
  makeRepo,
  pidIn,
  runCli,
  startCli,
  tempDir,
  waitFor,
  worktrees,
  writePlan
} from "../helpers.ts"

const lines = (file: string): Array<string> =>
  NodeFs.existsSync(file)
    ? NodeFs.readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.length > 0)
    : []

describe("crash and resume (end to end)", () => {
  it("after kill -9, --resume runs exactly the agents without a recorded success", async () => {
    const repo = makeRepo()
    const side = NodePath.join(tempDir("side-"), "effects.txt")
    const agents = Array.from(
      { length: 10 },
      (_, i) => `  - id: agent-${i}
    run: echo "$CORRAL_AGENT_ID" >> ${side} && sleep ${i < 4 ? "0.2" : "2"}
`
    ).join("")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", `version: 1\nconcurrency: 4\nagents:\n${agents}`)
    const first = startCli(["run", plan, "--json"], { cwd: repo })
    const succeeded = () =>
      first
        .output()
        .split("\n")
        .filter((line) => line.includes('"type":"Finished"') && line.includes('"Succeeded"')).length
    await waitFor(() => succeeded() >= 4, 30_000, "four agents to succeed")
    await new Promise((resolve) => setTimeout(resolve, 300))
    first.signal("SIGKILL")
    await first.done
    const finishedFirst = first
      .output()
      .split("\n")
      .filter((line) => line.includes('"type":"Finished"') && line.includes('"Succeeded"'))
      .map((line) => JSON.parse(line).agentId as string)
    await waitFor(() => !isAlive(first.pid), 5_000, "the first run to die")
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    const before = lines(side)

    const resumed = await runCli(["run", plan, "--resume"], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    expect(resumed.stdout).toMatch(/resuming run/)
    const after = lines(side)
    const rerun = after.slice(before.length)
    for (const id of finishedFirst) expect(rerun, `${id} ran again`).not.toContain(id)
    const expected = Array.from({ length: 10 }, (_, i) => `agent-${i}`).filter((id) => !finishedFirst.includes(id))
    expect([...rerun].sort()).toEqual(expected.sort())
    expect(resumed.stdout).toMatch(/cached/)

    const runs = await runCli(["runs"], { cwd: repo })
    const statuses = runs.stdout
      .trim()
      .split("\n")
      .map((line) => line.split(/\s+/)[1])
    expect(statuses).toEqual(["succeeded", "crashed"])

    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    const crashedRun = runs.stdout.trim().split("\n")[1]!.split(/\s+/)[0]!
    expect(branches(repo).filter((b) => b.includes(crashedRun) && !b.endsWith("/integration"))).toEqual([])
  })
})

describe("orphans of a crashed run (end to end)", () => {
  it("the next corral command stops the process groups a killed run left running", async () => {
    const repo = makeRepo()
    const pids = tempDir("orphans-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nagents:\n  - id: long\n    run: sh -c 'echo $$ > ${pids}/pid; sleep 300 & wait'\n`
    )
    const first = startCli(["run", plan], { cwd: repo })
    const pidFile = NodePath.join(pids, "pid")
    await waitFor(() => pidIn(pidFile) !== undefined, 20_000, "the agent to write its pid")
    const tracked = () => {
      const runs = NodePath.join(repo, ".corral", "runs")
      if (!NodeFs.existsSync(runs)) return false
      return NodeFs.readdirSync(runs).some((run) => NodeFs.existsSync(NodePath.join(runs, run, "pids", "long")))
    }
    await waitFor(tracked, 20_000, "corral to record the agent's process group")
    const pid = pidIn(pidFile)!
    first.signal("SIGKILL")
    await first.done
    expect(isAlive(pid), "the agent outlives its killed orchestrator").toBe(true)
    const quick = writePlan(tempDir("plan-"), "quick.yaml", "version: 1\nagents:\n  - id: quick\n    run: echo hi\n")
    const next = await runCli(["run", quick], { cwd: repo })
    expect(next.code, next.stdout + next.stderr).toBe(0)
    await waitFor(() => !isAlive(pid), 5_000, "the orphan to be stopped")
  })
})
