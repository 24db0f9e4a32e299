import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Cluster, ProcessKind } from "@corral/cluster"
import { AgentKind, Corral } from "@corral/core"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { readOnlyRole } from "../../packages/postgres/test/support/readOnlyRole.ts"
import { sharedServer } from "../../packages/postgres/test/support/server.ts"
import { isAlive, type RunningCli, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"

const server = await sharedServer()
const dir = tempDir("corral-cluster-e2e-")
const started: Array<RunningCli> = []
afterAll(() => {
  for (const cli of started) cli.signal("SIGKILL")
  NodeFs.rmSync(dir, { recursive: true, force: true })
})

const startRunner = async (url: string, args: ReadonlyArray<string> = []) => {
  const runner = startCli(["runner", "--cluster", url, "--repo", dir, ...args], { cwd: dir })
  started.push(runner)
  await waitFor(() => /runner \S+ ready/.test(runner.output()), 30_000, `runner ready: ${runner.output()}`)
  return runner
}

const listRunners = async (url: string) => {
  const listed = await runCli(["runners", "--cluster", url, "--json"], { cwd: dir })
  expect(listed.code, listed.stderr).toBe(0)
  return listed.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { address: string; capacity: number; labels: Array<string>; pid: number })
}

describe.skipIf(server === undefined)("corral runner / runners", () => {
  it("rejects a missing or unreachable cluster URL with exit 2, naming it", async () => {
    const missing = await runCli(["runner"], { cwd: dir, env: { CORRAL_CLUSTER: "" } })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/--cluster <postgres-url> \(or CORRAL_CLUSTER\) is required/)
    const unreachable = await runCli(["runners", "--cluster", "postgres://corral:secret@127.0.0.1:1/nowhere"], {
      cwd: dir
    })
    expect(unreachable.code).toBe(2)
    expect(unreachable.stderr).toMatch(
      /cannot connect to Postgres at postgres:\/\/corral:\*\*\*@127\.0\.0\.1:1\/nowhere/
    )
    const bad = await runCli(["runners", "--cluster", "mysql://x"], { cwd: dir })
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/not a postgres:\/\/ URL/)
  })

  it("corral runner rejects a bad --port, an address it cannot listen on and a --repo that is no folder with exit 2, naming them", async () => {
    const url = await Effect.runPromise(server!.createDatabase())
    const file = NodePath.join(dir, "a-file")
    NodeFs.writeFileSync(file, "")
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["--port", "99999"], /--port 99999: expected a port number from 1 to 65535/],
      [
        ["--port", String(server!.port)],
        new RegExp(`cannot listen on 127\\.0\\.0\\.1:${server!.port} \\(--host, --port\\): .*EADDRINUSE`)
      ],
      [["--host", "192.0.2.1"], /cannot listen on 192\.0\.2\.1:\d+ \(--host, --port\): .*EADDRNOTAVAIL/],
      [["--repo", NodePath.join(dir, "missing")], /--repo \S+missing: not a directory/],
      [["--repo", file], /--repo \S+a-file: not a directory/]
    ]
    for (const [args, message] of cases) {
      const refused = await runCli(["runner", "--cluster", url, ...args], { cwd: dir })
      expect(refused.code, `${args.join(" ")}: ${refused.stderr}`).toBe(2)
      expect(refused.stderr).toMatch(message)
      expect(refused.stdout).not.toMatch(/ready/)
    }
    expect(await listRunners(url)).toEqual([])
  }, 120_000)

  it("corral runner refuses a malformed or repeated --labels with exit 2 before it connects, naming --labels and why", async () => {
    const unreachable = "postgres://corral@127.0.0.1:1/nowhere"
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      ["gpu#1", /--labels gpu#1: a label must not contain "#", "~" or ",", got "gpu#1"/],
      ["linux,gpu~1", /--labels linux,gpu~1: a label must not contain "#", "~" or ",", got "gpu~1"/],
      ["gpu,gpu", /--labels gpu,gpu: "gpu" is given twice/]
    ]
    for (const [labels, message] of cases) {
      const refused = await runCli(["runner", "--cluster", unreachable, "--labels", labels], { cwd: dir })
      expect(refused.code, `${labels}: ${refused.stderr}`).toBe(2)
      expect(refused.stderr).toMatch(message)
      expect(refused.stderr).not.toMatch(/InvalidOption|cannot connect/)
    }
  }, 120_000)

  it("corral run --cluster refuses an agent requiring a label no runner can have with exit 2, nothing started", async () => {
    const url = await Effect.runPromise(server!.createDatabase())
    const plan = writePlan(
      dir,
      "bad-label.yaml",
      "version: 1\nisolation: none\nagents:\n  - id: a\n    run: echo a\n  - id: trains\n    run: echo b\n    labels:\n      requires: gpu#1\n"
    )
    const refused = await runCli(["run", plan, "--cluster", url], { cwd: dir })
    expect(refused.code, refused.stderr).toBe(2)
    expect(refused.stderr).toMatch(
      /bad-label\.yaml: agent trains requires the label "gpu#1", which no runner can have: a label must not contain "#", "~" or ","/
    )
    const listed = await runCli(["runs", "--cluster", url], { cwd: dir })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toBe("")
  }, 120_000)

  it("corral run --cluster and corral runners say the server's answer when the role may not create the cluster's tables", async () => {
    const url = await Effect.runPromise(readOnlyRole(server!))
    const plan = writePlan(dir, "read-only.yaml", "version: 1\nisolation: none\nagents:\n  - id: a\n    run: echo a\n")
    const answer = /PgConnection: Query failed \(permission denied for schema public\)/
    const run = await runCli(["run", plan, "--cluster", url], { cwd: dir })
    expect(run.code, run.stderr).toBe(2)
    expect(run.stderr).toMatch(answer)
    const listed = await runCli(["runners", "--cluster", url], { cwd: dir })
    expect(listed.code, listed.stderr).toBe(2)
    expect(listed.stderr).toMatch(answer)
  }, 120_000)

  it("corral run --cluster with --concurrency 0 is exit 2 before anything is recorded", async () => {
    const url = await Effect.runPromise(server!.createDatabase())
    await startRunner(url)
    const plan = writePlan(
      dir,
      "concurrency.yaml",
      "version: 1\nisolation: none\nagents:\n  - id: a\n    run: echo a\n"
    )
    const refused = await runCli(["run", plan, "--cluster", url, "--concurrency", "0"], { cwd: dir })
    expect(refused.code, refused.stderr).toBe(2)
    expect(refused.stderr).toMatch(/--concurrency must be at least 1, got 0/)
    const listed = await runCli(["runs", "--cluster", url], { cwd: dir })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toBe("")
  }, 120_000)

  it("runners list themselves, run process agents in their repository, take their processes down when killed, and drain on Ctrl-C", async () => {
    const url = await Effect.runPromise(server!.createDatabase())
    const first = await startRunner(url, ["--capacity", "3", "--labels", "gpu,linux"])
    const second = await startRunner(url)
    const listed = await listRunners(url)
    expect(listed.map((r) => [r.capacity, r.labels]).sort()).toEqual([
      [3, ["gpu", "linux"]],
      [8, []]
    ])

    const agents = Array.from({ length: 6 }, (_, i) =>
      AgentKind.agent(ProcessKind.ProcessKind, `write-${i}`, {
        command: `echo $PPID > out-${i}.txt`,
        shell: true
      })
    )
    const result = await Effect.runPromise(
      Corral.run(agents, { runId: "e2e-1" }).pipe(Effect.provide(Cluster.layerExecutor({ url })))
    )
    for (const agent of agents) expect(result.get(agent.id)!._tag, agent.id).toBe("Succeeded")
    for (let i = 0; i < 6; i++) expect(NodeFs.existsSync(NodePath.join(dir, `out-${i}.txt`))).toBe(true)

    const pidFile = NodePath.join(dir, "long.pid")
    // the coordinator waits until the agent's process is gone, then stops: its interruption cannot race
    // the agent's start (the runner's workspace set-up can take seconds on a loaded machine)
    const coordinator = new AbortController()
    const long = Effect.runPromise(
      Corral.run(
        [
          AgentKind.agent(ProcessKind.ProcessKind, "long", {
            command: `echo $$ > ${pidFile}; exec sleep 300`,
            shell: true
          })
        ],
        { runId: "e2e-2" }
      ).pipe(Effect.provide(Cluster.layerExecutor({ url })), Effect.ignore),
      { signal: coordinator.signal }
    ).catch(() => undefined)
    await waitFor(
      () => NodeFs.existsSync(pidFile) && NodeFs.readFileSync(pidFile, "utf8").trim() !== "",
      30_000,
      "long agent"
    )
    const agentPid = Number(NodeFs.readFileSync(pidFile, "utf8").trim())
    expect(isAlive(agentPid)).toBe(true)
    for (const runner of [first, second]) runner.signal("SIGKILL")
    // the watchdog polls every 0.5 s; 10 s was too short once at load average 14 on 2 cores. A killed
    // orphan is a zombie until PID 1 reaps it (lazily, or never in some containers): isAlive says dead.
    await waitFor(() => !isAlive(agentPid), 60_000, "the agent's process to die with its runner")
    coordinator.abort()
    await long

    const third = await startRunner(url)
    third.signal("SIGINT")
    const ended = await third.done
    expect(ended.code).toBe(130)
    expect((await listRunners(url)).map((r) => r.pid)).not.toContain(third.pid)

    // its terminal closed: SIGHUP drains it as Ctrl-C does (Node's default ended it at once)
    const fourth = await startRunner(url)
    fourth.signal("SIGHUP")
    const hungUp = await fourth.done
    expect(hungUp.code, hungUp.stderr).toBe(130)
    expect((await listRunners(url)).map((r) => r.pid)).not.toContain(fourth.pid)
  }, 240_000)

  it("corral run --cluster runs a plan's agents on the runners with the same events, summary and exit codes", async () => {
    const url = await Effect.runPromise(server!.createDatabase())
    const empty = await Effect.runPromise(server!.createDatabase())
    const repo = tempDir("corral-cluster-run-")
    const plan = writePlan(
      repo,
      "plan.yaml",
      `version: 1
isolation: none
concurrency: 4
agents:
  - id: first
    run: echo "$CORRAL_AGENT_ID $CORRAL_FENCING_TOKEN" >> ran.txt
  - id: second
    run: sleep 0.2 && echo "$CORRAL_AGENT_ID" >> ran.txt
    dependsOn: [first]
    claims: { write: [ran.txt] }
  - id: third
    run: echo "$CORRAL_AGENT_ID" >> ran.txt
    dependsOn: [first]
    claims: { write: [ran.txt] }
  - id: broken
    run: exit 3
`
    )
    const noRunner = await runCli(["run", plan, "--cluster", empty], { cwd: repo })
    expect(noRunner.code, noRunner.stderr).toBe(2)
    expect(noRunner.stderr).toMatch(/no runner is online/)

    const worktrees = writePlan(repo, "worktrees.yaml", "version: 1\nagents:\n  - id: a\n    run: echo a\n")
    const notGit = await runCli(["run", worktrees, "--cluster", url], { cwd: repo })
    expect(notGit.code).toBe(2)
    expect(notGit.stderr).toMatch(
      /is not a git repository \(worktree isolation with --cluster merges into a git repository\)/
    )

    const runner = startCli(["runner", "--cluster", url, "--repo", repo], { cwd: repo })
    started.push(runner)
    await waitFor(() => /runner \S+ ready/.test(runner.output()), 30_000, "runner ready")
    const result = await runCli(["run", plan, "--json"], { cwd: dir, env: { CORRAL_CLUSTER: url } })
    expect(result.code, result.stderr).toBe(1)
    const events = result.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { type: string; agentId?: string; outcome?: { type: string } })
    const finished = events.filter((event) => event.type === "Finished")
    expect(finished.map((event) => event.agentId).sort()).toEqual(["broken", "first", "second", "third"])
    expect(Object.fromEntries(finished.map((event) => [event.agentId, event.outcome?.type]))).toEqual({
      first: "Succeeded",
      second: "Succeeded",
      third: "Succeeded",
      broken: "Failed"
    })
    const ran = NodeFs.readFileSync(NodePath.join(repo, "ran.txt"), "utf8").trim().split("\n")
    expect(ran[0]).toMatch(/^first \d+$/)
    expect(ran.slice(1).sort()).toEqual(["second", "third"])
    expect(result.stderr).toMatch(/3 succeeded, 1 failed/)
    const runId = /run (\S+): 3 succeeded/.exec(result.stderr)![1]!
    const listed = await runCli(["runs", "--cluster", url], { cwd: dir })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(new RegExp(`${runId}\\s+failed .* 3/4 succeeded`))
    const shown = await runCli(["status", runId], { cwd: dir, env: { CORRAL_CLUSTER: url } })
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/broken\s+failed .*exited with code 3/)
    const html = NodePath.join(dir, "cluster-report.html")
    const reported = await runCli(["report", "--cluster", url, "--html", html], { cwd: dir })
    expect(reported.code, reported.stderr).toBe(0)
    expect(NodeFs.readFileSync(html, "utf8")).toContain(runId)
    NodeFs.rmSync(repo, { recursive: true, force: true })
  }, 240_000)
})
