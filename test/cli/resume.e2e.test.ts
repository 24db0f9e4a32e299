import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import {
  branches,
  git,
  isAlive,
  jsonEvents,
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
    const sideDir = tempDir("side-")
    const side = NodePath.join(sideDir, "effects.txt")
    const gate = NodePath.join(sideDir, "gate")
    // four agents end at once; the others wait for the gate, opened once the first run is killed
    const agents = Array.from(
      { length: 10 },
      (_, i) => `  - id: agent-${i}
    run: echo "$CORRAL_RUN_ID $CORRAL_AGENT_ID" >> ${side} && ${i < 4 ? "true" : `while [ ! -e ${gate} ]; do sleep 0.05; done`}
`
    ).join("")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", `version: 1\nconcurrency: 4\nagents:\n${agents}`)
    const first = startCli(["run", plan, "--json"], { cwd: repo })
    await waitFor(() => jsonEvents(first.output()).length > 0, 30_000, "the run to start")
    const firstRunId: string = jsonEvents(first.output())[0].runId
    // a success counts once the ledger holds it (corral prints an event before it records it)
    const recordedSuccesses = async () =>
      [...(await runCli(["status", firstRunId], { cwd: repo })).stdout.matchAll(/^\s+(agent-\d+)\s+succeeded/gm)].map(
        (match) => match[1]!
      )
    while ((await recordedSuccesses()).length < 4);
    first.signal("SIGKILL")
    await first.done
    await waitFor(() => !isAlive(first.pid), 5_000, "the first run to die")
    const finishedFirst = await recordedSuccesses()
    expect(finishedFirst).toHaveLength(4)
    NodeFs.writeFileSync(gate, "")

    const resumed = await runCli(["run", plan, "--resume"], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    expect(resumed.stdout).toMatch(/resuming run/)
    // what the killed run's agents wrote may land late: the resumed run's lines are told by their run id
    const rerun = lines(side)
      .map((line) => line.split(" "))
      .filter(([runId]) => runId !== firstRunId)
      .map(([, agentId]) => agentId!)
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

  it("a resume that merges nothing new keeps its integration branch: it starts from the old run's head and holds the lineage's work", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "version: 1\nagents:\n  - id: writes\n    run: echo work > work.txt\n  - id: fails\n    run: exit 3\n"
    )
    const first = await runCli(["run", plan, "--json"], { cwd: repo })
    expect(first.code, first.stdout + first.stderr).toBe(1)
    const firstRunId: string = jsonEvents(first.stdout)[0].runId
    expect(git(repo, "show", `corral/${firstRunId}/integration:work.txt`)).toBe("work\n")
    const resumed = await runCli(["run", plan, "--resume-from", firstRunId, "--json"], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(1)
    const resumedId: string = jsonEvents(resumed.stdout)[0].runId
    expect(resumedId).not.toBe(firstRunId)
    expect(git(repo, "show", `corral/${resumedId}/integration:work.txt`), "the resumed run's branch").toBe("work\n")
    const summary = await runCli(["run", plan, "--resume-from", resumedId], { cwd: repo })
    expect(summary.code, summary.stdout + summary.stderr).toBe(1)
    const thirdId = /^run (\S+): /m.exec(summary.stdout)?.[1]
    expect(thirdId, summary.stdout).toBeDefined()
    const head = git(repo, "rev-parse", `corral/${thirdId}/integration`).trim()
    expect(summary.stdout.replace(/\s+/g, " "), "the summary of a resume that merged nothing new").toContain(
      `no new work merged; the work of the runs this one resumes is on its integration branch (${head.slice(0, 10)}); take it with: git merge corral/${thirdId}/integration `
    )
    expect(summary.stdout).toContain(`\n  git merge corral/${thirdId}/integration\n`)
    expect(summary.stdout).not.toMatch(/merged work of/)
  }, 60_000)

  it("--resume of a run that is still running is refused: exit 2, no second coordinator", async () => {
    const repo = makeRepo()
    const signals = tempDir("signals-")
    const side = NodePath.join(signals, "effects.txt")
    const go = NodePath.join(signals, "go")
    execFileSync("mkfifo", [go])
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: slow\n    run: echo "$CORRAL_RUN_ID" >> ${side}; [ $(wc -l < ${side}) -gt 1 ] || read line < ${go}\n  - id: after\n    run: "true"\n    dependsOn: [slow]\n`
    )
    const first = startCli(["run", plan, "--json"], { cwd: repo })
    await waitFor(() => lines(side).length === 1, 30_000, "the agent to start")
    const runId: string = jsonEvents(first.output())[0].runId
    for (const flags of [["--resume"], ["--resume-from", runId]]) {
      const second = await runCli(["run", plan, ...flags], { cwd: repo })
      expect(second.code, second.stdout + second.stderr).toBe(2)
      expect(second.stderr).toContain(`run ${runId} is still running (pid ${first.pid} on `)
      expect(lines(side)).toEqual([runId])
    }
    const runs = await runCli(["runs"], { cwd: repo })
    expect(runs.stdout.trim().split("\n")).toHaveLength(1)
    NodeFs.writeFileSync(go, "\n")
    const done = await first.done
    expect(done.code, done.stdout + done.stderr).toBe(0)
  }, 120_000)

  it("--resume-from of a discarded run is refused: its recorded successes' work is gone with its branches", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: good\n    run: echo good > good.txt\n  - id: bad\n    run: exit 1\n"
    )
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(1)
    const runId = (await runCli(["runs"], { cwd: repo })).stdout.split(/\s+/)[0]!
    expect((await runCli(["discard", runId, "--yes"], { cwd: repo })).code).toBe(0)
    const resumed = await runCli(["run", plan, "--resume-from", runId], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(2)
    expect(resumed.stderr).toContain(`run ${runId} was discarded`)
    expect((await runCli(["runs"], { cwd: repo })).stdout.trim().split("\n")).toHaveLength(1)
  }, 120_000)
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
