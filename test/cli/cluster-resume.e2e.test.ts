import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { isAlive, jsonEvents, parentOf, type RunningCli, runCli, startCli, waitFor, writePlan } from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"

const { available, scratch, track, runners, listedAs } = await clusterTests()

interface JsonEvent {
  readonly type: string
  readonly agentId?: string
  readonly runId?: string
  readonly outcome?: { readonly type: string; readonly cached?: boolean }
}

const eventsOf = (stdout: string): Array<JsonEvent> => jsonEvents<JsonEvent>(stdout)

const finishedOf = (stdout: string) => eventsOf(stdout).filter((event) => event.type === "Finished")

/** Each line the agents append: `start|end <agent> <run id the runner gave it>`. */
const recorded = (repo: string) => {
  const file = NodePath.join(repo, "record.txt")
  if (!NodeFs.existsSync(file)) return []
  return NodeFs.readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [what, agent, runId, , pid] = line.split(" ")
      return { what: what!, agent: agent!, runId: runId!, pid }
    })
}

/** The runner among `runners` that `pid` descends from (read from /proc while `pid` lives). */
const runnerOf = <A extends RunningCli>(pid: number, runners: ReadonlyArray<A>): A | undefined => {
  for (let current: number | undefined = pid, hops = 0; current !== undefined && current > 1 && hops < 20; hops++) {
    const found = runners.find((runner) => runner.pid === current)
    if (found !== undefined) return found
    current = parentOf(current)
  }
  return undefined
}

// `quick-*` end at once; `held-*` run until the test creates their release file, so they are running
// on a runner when the coordinator is killed; `after` depends on `held-1`, so only the resumed run
// starts it. Every agent records its start and end with the run id its runner gave it.
const planText = `version: 1
isolation: none
concurrency: 4
agents:
  - id: quick-1
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt && echo "quick one says hi" && echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt
  - id: quick-2
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt && echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt
  - id: held-1
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt; echo "held-1 waiting"; while [ ! -e release-held-1 ]; do sleep 0.05; done; echo "held-1 released"; echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt
  - id: held-2
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt; echo "held-2 waiting"; while [ ! -e release-held-2 ]; do sleep 0.05; done; echo "held-2 released"; echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt
  - id: after
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt && echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID" >> record.txt
    dependsOn: [held-1]
`

describe.skipIf(!available)("corral run --resume --cluster", () => {
  it("continues a run whose coordinator was SIGKILLed: successes are not re-run, running executions are taken over, each agent ends once", async () => {
    const repo = scratch("corral-cluster-resume-")
    const other = scratch("corral-cluster-machine-b-")
    const plan = writePlan(repo, "plan.yaml", planText)
    const { url } = await runners(2, repo)

    const nothing = await runCli(["run", plan, "--resume", "--cluster", url], { cwd: repo })
    expect(nothing.code, nothing.stderr).toBe(2)
    expect(nothing.stderr).toMatch(/no unfinished run of .*plan\.yaml in the cluster's ledger to resume/)

    const coordinator = track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
    const ran = (agent: string, what: "start" | "end") => () =>
      recorded(repo).some((line) => line.agent === agent && line.what === what)
    await waitFor(
      () => ran("held-1", "start")() && ran("held-2", "start")() && ran("quick-1", "end")() && ran("quick-2", "end")(),
      60_000,
      `agents to start: ${coordinator.output()}`
    )
    const firstRunId = recorded(repo).find((line) => line.agent === "held-1")!.runId
    // the coordinator records the quick agents' successes before it is killed
    await waitFor(
      () => finishedOf(coordinator.output()).filter((event) => event.outcome?.type === "Succeeded").length === 2,
      60_000,
      "quick agents finished"
    )
    const recordedSuccesses = async () => {
      const shown = await runCli(["status", firstRunId, "--cluster", url], { cwd: other })
      return (shown.stdout.match(/succeeded/g) ?? []).length === 2 ? shown : undefined
    }
    let live: Awaited<ReturnType<typeof recordedSuccesses>>
    const deadline = Date.now() + 60_000
    while ((live = await recordedSuccesses()) === undefined && Date.now() < deadline);
    expect(live?.stdout, "successes recorded in the ledger").toMatch(new RegExp(`run ${firstRunId}: running`))

    // a second coordinator of the live run is refused
    const twice = await runCli(["run", plan, "--resume", "--cluster", url], { cwd: repo })
    expect(twice.code, twice.stderr).toBe(2)
    expect(twice.stderr).toMatch(
      new RegExp(`run ${firstRunId} is still running: its coordinator \\(pid ${coordinator.pid} on `)
    )

    coordinator.signal("SIGKILL")
    await coordinator.done

    // machine B (another folder, only the database in common) tells the crashed coordinator from a live one
    let crashed = ""
    const until = Date.now() + 60_000
    while (Date.now() < until) {
      const listed = await runCli(["runs", "--cluster", url], { cwd: other })
      expect(listed.code, listed.stderr).toBe(0)
      if (new RegExp(`${firstRunId}\\s+crashed`).test(listed.stdout)) {
        crashed = listed.stdout
        break
      }
      expect(listed.stdout).toMatch(new RegExp(`${firstRunId}\\s+running`))
    }
    expect(crashed).toMatch(new RegExp(`${firstRunId}\\s+crashed`))
    const status = await runCli(["status", firstRunId], { cwd: other, env: { CORRAL_CLUSTER: url } })
    expect(status.stdout).toMatch(
      new RegExp(`run ${firstRunId}: crashed \\(coordinator pid ${coordinator.pid} on \\S+ is gone\\)`)
    )

    // held-1 ends while no coordinator runs: its result waits in Postgres for the resumed run
    NodeFs.writeFileSync(NodePath.join(repo, "release-held-1"), "")
    await waitFor(ran("held-1", "end"), 60_000, "held-1 to end")

    const resumed = track(startCli(["run", plan, "--resume", "--cluster", url, "--json", "--report"], { cwd: repo }))
    await waitFor(() => /resuming run/.test(resumed.output()), 60_000, `resume to start: ${resumed.output()}`)
    // held-2 is still running on its runner: the resumed run awaits that execution
    expect(ran("held-2", "end")()).toBe(false)
    await waitFor(() => eventsOf(resumed.output()).some((event) => event.type === "RunStarted"), 60_000, "RunStarted")
    const resumedId = (eventsOf(resumed.output()).find((event) => event.type === "RunStarted") as { runId: string })
      .runId
    // machine B follows held-2's output while it runs, until the resumed run records its outcome
    const follow = startCli(["logs", resumedId, "held-2", "--follow", "--cluster", url], { cwd: other })
    await waitFor(() => follow.output().includes("held-2 waiting\n"), 60_000, `live output: ${follow.output()}`)
    NodeFs.writeFileSync(NodePath.join(repo, "release-held-2"), "")
    const followed = await follow.done
    expect(followed.code, followed.stderr).toBe(0)
    expect(followed.stdout).toBe("held-2 waiting\nheld-2 released\n")
    const result = await resumed.done
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).toMatch(
      new RegExp(`resuming run ${firstRunId}: recorded successes are reused; 3 agents without an outcome take over`)
    )

    // exactly one Finished per agent; the quick ones from the ledger, the held ones from their executions
    const finished = finishedOf(result.stdout)
    expect(finished.map((event) => event.agentId).sort()).toEqual(["after", "held-1", "held-2", "quick-1", "quick-2"])
    const byAgent = Object.fromEntries(finished.map((event) => [event.agentId, event.outcome]))
    for (const id of ["quick-1", "quick-2"]) expect(byAgent[id], id).toMatchObject({ type: "Succeeded", cached: true })
    for (const id of ["held-1", "held-2", "after"]) {
      expect(byAgent[id]?.type, id).toBe("Succeeded")
      expect(byAgent[id]?.cached, id).not.toBe(true)
    }

    // every agent ran exactly once across both coordinators; the held ones in the first run's executions
    const lines = recorded(repo)
    for (const id of ["quick-1", "quick-2", "held-1", "held-2", "after"]) {
      expect(lines.filter((line) => line.agent === id && line.what === "start").length, `${id} starts`).toBe(1)
      expect(lines.filter((line) => line.agent === id && line.what === "end").length, `${id} ends`).toBe(1)
    }
    for (const id of ["quick-1", "quick-2", "held-1", "held-2"])
      expect(lines.find((line) => line.agent === id)!.runId, id).toBe(firstRunId)
    const resumedRunId = lines.find((line) => line.agent === "after")!.runId
    expect(resumedRunId).toBe(resumedId)
    expect(resumedRunId).not.toBe(firstRunId)
    const reportFile = NodePath.join(NodeFs.realpathSync(repo), ".corral", "runs", resumedRunId, "report.html")
    expect(result.stderr).toContain(`report: ${reportFile}`)
    expect(NodeFs.readFileSync(reportFile, "utf8")).toContain("held-2")

    // the ledger: the first run crashed, the resumed one succeeded with every agent once
    const listed = await runCli(["runs", "--cluster", url], { cwd: other })
    expect(listed.stdout).toMatch(new RegExp(`${resumedRunId}\\s+succeeded .* 5/5 succeeded`))
    expect(listed.stdout).toMatch(new RegExp(`${firstRunId}\\s+crashed .* 2/5 succeeded`))
    const shown = await runCli(["status", resumedRunId, "--cluster", url], { cwd: other })
    expect(shown.stdout).toMatch(/quick-1\s+cached/)
    expect(shown.stdout).toMatch(/held-1\s+succeeded/)
    expect(shown.stdout).toMatch(/after\s+succeeded/)

    // logs from machine B: what the runner's agent printed, from the execution the resumed run took over
    const logs = await runCli(["logs", resumedRunId, "held-1", "--cluster", url], { cwd: other })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stdout).toBe("held-1 waiting\nheld-1 released\n")
    expect(logs.stderr).toMatch(new RegExp(`── run ${firstRunId} attempt 1 on runner 127\\.0\\.0\\.1:\\d+`))
    const quick = await runCli(["logs", "quick-1", "--cluster", url], { cwd: other })
    expect(quick.stdout).toBe("quick one says hi\n")
    const silent = await runCli(["logs", resumedRunId, "quick-2", "--cluster", url], { cwd: other })
    expect(silent.code).toBe(2)
    expect(silent.stderr).toMatch(/agent quick-2 of run \S+ ended cached with no stored output/)
  }, 480_000)

  it("an execution whose runner dies while no coordinator runs is run again on another runner once the run is resumed (at-least-once), and ends once", async () => {
    const repo = scratch("corral-cluster-resume-rerun-")
    const plan = writePlan(
      repo,
      "plan.yaml",
      `version: 1
isolation: none
agents:
  - id: held
    run: echo "start $CORRAL_AGENT_ID $CORRAL_RUN_ID $PPID $$" >> record.txt; while [ ! -e release ]; do sleep 0.05; done; echo "end $CORRAL_AGENT_ID $CORRAL_RUN_ID $PPID $$" >> record.txt
`
    )
    const { url, runners: started } = await runners(2, repo)
    const starts = () => recorded(repo).filter((line) => line.what === "start")
    const coordinator = track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
    await waitFor(() => starts().length === 1, 60_000, `held to start: ${coordinator.output()}`)
    coordinator.signal("SIGKILL")
    await coordinator.done

    // the runner that runs it dies too (placement is random: find it among the agent's ancestors)
    const [, , firstRunId, , agentPid] = NodeFs.readFileSync(NodePath.join(repo, "record.txt"), "utf8")
      .trim()
      .split(" ")
    const victim = runnerOf(Number(agentPid), started)
    expect(victim, `the runner of held (pid ${agentPid})`).toBeDefined()
    victim!.signal("SIGKILL")
    await victim!.done
    await waitFor(() => !isAlive(Number(agentPid)), 30_000, "the agent's process to die with its runner")

    await listedAs(url, repo, new RegExp(`${firstRunId}\\s+crashed`))
    const resumed = track(startCli(["run", plan, "--resume", "--cluster", url, "--json"], { cwd: repo }))
    // delivered again to the surviving runner once the dead runner's shards lapse, as the same execution
    await waitFor(() => starts().length === 2, 90_000, `held to run again: ${resumed.output()}`)
    const survivor = started.find((runner) => runner !== victim)!
    expect(runnerOf(Number(starts()[1]!.pid), started)).toBe(survivor)
    NodeFs.writeFileSync(NodePath.join(repo, "release"), "")
    const result = await resumed.done
    expect(result.code, result.stderr).toBe(0)
    expect(finishedOf(result.stdout).map((event) => [event.agentId, event.outcome?.type])).toEqual([
      ["held", "Succeeded"]
    ])
    const lines = recorded(repo)
    expect(lines.map((line) => [line.what, line.runId])).toEqual([
      ["start", firstRunId],
      ["start", firstRunId],
      ["end", firstRunId]
    ])
  }, 480_000)
})
