import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { startCli, waitFor, writePlan } from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"

const cluster = await clusterTests()

/** A one-runner cluster running a plan of one agent `id` (`touch <marker> && command`), once the agent has started. */
const startedRun = async (id: string, command: string) => {
  const repo = cluster.scratch("corral-outage-")
  const { url, runners } = await cluster.runners(1, repo)
  const started = NodePath.join(cluster.scratch("corral-outage-marker-"), "started")
  const plan = writePlan(
    cluster.scratch("corral-plan-"),
    "plan.yaml",
    `version: 1\nisolation: none\nagents:\n  - id: ${id}\n    run: touch ${started} && ${command}\n`
  )
  const run = cluster.track(startCli(["run", plan, "--cluster", url], { cwd: repo }))
  await waitFor(() => NodeFs.existsSync(started), 60_000, `the agent to start: ${run.output()}`)
  return { repo, url, run, runner: runners[0]! }
}

describe.skipIf(!cluster.available)("corral run --cluster while the cluster's database is down", () => {
  it("Ctrl-C: the summary, exit 130, and a message that the run's end was not recorded; back up, the run shows as crashed", async () => {
    const { repo, url, run } = await startedRun("slow", "exec sleep 300")
    await Effect.runPromise(cluster.server!.kill)
    run.signal("SIGINT")
    const stopped = await run.done
    await Effect.runPromise(cluster.server!.restart)
    expect(stopped.code, stopped.stderr).toBe(130)
    expect(stopped.stdout).toMatch(/slow\s+│ interrupted/)
    expect(stopped.stderr).toContain(`corral: cannot record the end of run `)
    expect(stopped.stderr).toContain("corral run --resume --cluster")
    const listed = await cluster.listedAs(url, repo, /crashed/)
    expect(listed).toMatch(/crashed/)
  }, 180_000)

  it("an outage is announced and its end too; the run then continues and succeeds", async () => {
    const { run } = await startedRun("short", "sleep 2")
    await Effect.runPromise(cluster.server!.kill)
    await waitFor(
      () => /the cluster's database does not answer/.test(run.output()),
      60_000,
      `the notice: ${run.output()}`
    )
    await Effect.runPromise(cluster.server!.restart)
    await waitFor(() => /the cluster's database answers again/.test(run.output()), 60_000, `the end: ${run.output()}`)
    const ended = await run.done
    expect(ended.code, run.output()).toBe(0)
    expect(ended.stdout).toMatch(/short\s+│ succeeded/)
  }, 180_000)

  it("a runner says in one plain line that the database does not answer, and one when it answers again", async () => {
    const repo = cluster.scratch("corral-outage-runner-")
    const { url, runners } = await cluster.runners(1, repo)
    const runner = runners[0]!
    await Effect.runPromise(cluster.server!.kill)
    await waitFor(() => /does not answer/.test(runner.output()), 60_000, `the notice: ${runner.output()}`)
    await Effect.runPromise(cluster.server!.restart)
    await waitFor(() => /answers again/.test(runner.output()), 60_000, `the end: ${runner.output()}`)
    const said = runner.output()
    expect(said).toContain(`runner ${runner.address}: the cluster's database ${url} does not answer`)
    expect(said).toContain(`runner ${runner.address}: the cluster's database ${url} answers again`)
    expect(said).not.toMatch(/Shard lock storage|\n\s+at /)
    expect(said.match(/does not answer/g)).toHaveLength(1)
  }, 180_000)
})

describe.skipIf(!cluster.available)("corral run --cluster when every runner is gone", () => {
  it("says which agents wait for a runner, once, and again when one is back; the run then succeeds", async () => {
    // its second execution outlasts a check of the runners (every 5 s)
    const again = NodePath.join(cluster.scratch("corral-again-"), "ran")
    const command = `if [ -e ${again} ]; then sleep 12; else touch ${again} && sleep 300; fi`
    const { repo, url, run, runner } = await startedRun("lonely", command)
    runner.signal("SIGKILL")
    await waitFor(() => /no runner is alive/.test(run.output()), 90_000, "the notice")
    expect(run.output()).toContain("no runner is alive: agent lonely waits for one")
    await cluster.startRunner(url, repo)
    await waitFor(() => /a runner is alive again/.test(run.output()), 90_000, "the end of the wait")
    const ended = await run.done
    expect(ended.code, run.output()).toBe(0)
    expect(ended.stdout).toMatch(/lonely\s+│ succeeded/)
    expect(run.output().match(/no runner is alive/g)).toHaveLength(1)
  }, 240_000)
})
