import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { git, jsonEvents, runCli, startCli, waitFor, writePlan } from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"

const { available, scratch, scratchRepo, runnerClone, track, runners, listedAs } = await clusterTests()

interface JsonEvent {
  readonly type: string
  readonly agentId?: string
  readonly runId?: string
  readonly attempt?: number
  readonly outcome?: { readonly type: string; readonly cached?: boolean; readonly attempts?: number }
}

const eventsOf = (stdout: string): Array<JsonEvent> => jsonEvents<JsonEvent>(stdout)

const outcomeOf = (stdout: string, agentId: string) =>
  eventsOf(stdout).find((event) => event.type === "Finished" && event.agentId === agentId)?.outcome

const lines = (file: string) =>
  NodeFs.existsSync(file)
    ? NodeFs.readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
    : []

describe.skipIf(!available)("cluster runs: retry budget across a resume, caching by inputs", () => {
  it("a resumed run continues an agent's attempts from those its crashed run made", async () => {
    const repo = scratch("corral-cluster-budget-")
    const tries = NodePath.join(repo, "tries.txt")
    // attempt 1 fails at once; later attempts wait for the release file, then fail too
    const plan = writePlan(
      repo,
      "plan.yaml",
      `version: 1
isolation: none
agents:
  - id: flaky
    retries: 2
    run: n=$(cat tries.txt 2>/dev/null | wc -l); echo "try $CORRAL_RUN_ID" >> tries.txt; echo "try $n"; if [ "$n" -ge 1 ]; then while [ ! -e release ]; do sleep 0.05; done; fi; exit 1
`
    )
    const { url } = await runners(1, repo)
    const coordinator = track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
    await waitFor(() => lines(tries).length === 2, 60_000, `the second attempt to start: ${coordinator.output()}`)
    coordinator.signal("SIGKILL")
    await coordinator.done
    const firstRunId = lines(tries)[0]!.split(" ")[1]!
    const listed = await listedAs(url, repo, new RegExp(`${firstRunId}\\s+crashed`))
    expect(listed).toMatch(new RegExp(`${firstRunId}\\s+crashed`))

    const resumed = track(startCli(["run", plan, "--resume", "--cluster", url, "--json"], { cwd: repo }))
    await waitFor(() => /resuming run/.test(resumed.output()), 60_000, `resume to start: ${resumed.output()}`)
    NodeFs.writeFileSync(NodePath.join(repo, "release"), "")
    const result = await resumed.done
    expect(result.code, result.stderr).toBe(1)
    expect(outcomeOf(result.stdout, "flaky")?.type).toBe("Failed")
    // three attempts in all (retries: 2): two in the crashed run, the third in the resumed run
    const all = lines(tries)
    expect(all.length, all.join("\n")).toBe(3)
    const resumedId = eventsOf(result.stdout).find((event) => event.type === "RunStarted")!.runId!
    expect(all.map((line) => line.split(" ")[1])).toEqual([firstRunId, firstRunId, resumedId])
    const logs = await runCli(["logs", resumedId, "flaky", "--cluster", url], { cwd: repo })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stderr).toMatch(new RegExp(`run ${firstRunId} attempt 2 on runner`))
    expect(logs.stderr).toMatch(new RegExp(`run ${resumedId} attempt 3 on runner`))
    expect(logs.stderr).not.toMatch(/attempt 4/)
  }, 240_000)

  it("with worktrees, a success is cached by the hash of its inputs: reused while they are unchanged and its work is in the base, run again otherwise", async () => {
    const repo = scratchRepo({ "README.md": "# test\n", "input.txt": "one\n" })
    const runnerRepo = runnerClone(repo, "cache")
    const runs = NodePath.join(scratch("corral-cache-log-"), "runs.txt")
    const plan = writePlan(
      scratch("corral-cache-plan-"),
      "plan.yaml",
      `version: 1
agents:
  - id: gen
    inputs: [input.txt]
    run: echo "$CORRAL_RUN_ID" >> ${runs}; cp input.txt out.txt
  - id: always
    run: echo always > always.txt
`
    )
    const { url } = await runners(1, runnerRepo)
    const run = async () => {
      const result = await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
      expect(result.code, result.stderr).toBe(0)
      return result.stdout
    }
    const first = await run()
    expect(outcomeOf(first, "gen")).toMatchObject({ type: "Succeeded" })
    expect(outcomeOf(first, "gen")?.cached).not.toBe(true)
    const runIdOf = (stdout: string) => eventsOf(stdout).find((event) => event.type === "RunStarted")!.runId!
    const second = await run()
    expect(outcomeOf(second, "gen")?.cached, "the first run's work is not in main: run again").not.toBe(true)
    expect(lines(runs).length).toBe(2)
    expect(git(repo, "show", `corral/${runIdOf(second)}/integration:out.txt`)).toBe("one\n")
    git(repo, "merge", "--quiet", "--ff-only", `corral/${runIdOf(second)}/integration`)
    const third = await run()
    expect(outcomeOf(third, "gen")).toMatchObject({ type: "Succeeded", cached: true })
    expect(outcomeOf(third, "always")?.cached).not.toBe(true)
    expect(lines(runs).length).toBe(2)

    NodeFs.writeFileSync(NodePath.join(repo, "input.txt"), "two\n")
    git(repo, "commit", "-qam", "change the input")
    const fourth = await run()
    expect(outcomeOf(fourth, "gen")?.type).toBe("Succeeded")
    expect(outcomeOf(fourth, "gen")?.cached).not.toBe(true)
    expect(lines(runs).length).toBe(3)
    expect(git(repo, "show", `corral/${runIdOf(fourth)}/integration:out.txt`)).toBe("two\n")
  }, 240_000)
})
