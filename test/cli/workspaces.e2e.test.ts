import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it, onTestFinished } from "vitest"
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
import { portBlockWarning, refusePortsPreload } from "./support/stalls.ts"

/** Waits until a run in `repo` recorded the process group of its agent `agentId`. */
const groupRecorded = (repo: string, agentId: string) => {
  const tracked = NodePath.join(repo, ".corral", "runs")
  return waitFor(
    () =>
      NodeFs.existsSync(tracked) &&
      NodeFs.readdirSync(tracked).some((run) => NodeFs.existsSync(NodePath.join(tracked, run, "pids", agentId))),
    30_000,
    "corral to record the agent's process group"
  )
}

const waitingAgent = (marker: string, go: string) =>
  `    run: touch ${marker}; while [ ! -e ${go} ]; do sleep 0.05; done; echo done > out.txt\n`

describe("gc and live runs (end to end)", () => {
  for (const how of ["--state-dir", "CORRAL_HOME"] as const) {
    it(`gc never touches a live run whose state is elsewhere (${how}), whatever gc is pointed at`, async () => {
      const repo = makeRepo()
      const state = tempDir("state-")
      const signals = tempDir("signals-")
      const marker = NodePath.join(signals, "started")
      const go = NodePath.join(signals, "go")
      const plan = writePlan(tempDir("plan-"), "plan.yaml", `agents:\n  - id: slow\n${waitingAgent(marker, go)}`)
      const placement =
        how === "--state-dir" ? { args: ["--state-dir", state], env: {} } : { args: [], env: { CORRAL_HOME: state } }
      const cli = startCli(["run", plan, ...placement.args], { cwd: repo, env: placement.env })
      await waitFor(() => NodeFs.existsSync(marker), 20_000, "the agent to start")
      const before = { worktrees: worktrees(repo), branches: branches(repo) }
      for (const gc of [
        { args: ["gc"], env: {} },
        { args: ["gc", "--state-dir", state], env: {} },
        { args: ["gc"], env: { CORRAL_HOME: state } }
      ]) {
        const result = await runCli(gc.args, { cwd: repo, env: gc.env })
        expect(result.code, result.stdout + result.stderr).toBe(0)
        expect(result.stdout).toContain("0 removed")
      }
      expect(worktrees(repo)).toEqual(before.worktrees)
      expect(branches(repo)).toEqual(before.branches)
      NodeFs.writeFileSync(go, "")
      const result = await cli.done
      expect(result.code, result.stdout + result.stderr).toBe(0)
      expect(result.stderr).not.toMatch(/\n\s+at /)
      const integration = branches(repo).find((b) => b.endsWith("/integration"))!
      expect(git(repo, "show", `${integration}:out.txt`)).toBe("done\n")
    })
  }
})

describe("gc of a killed run (end to end)", () => {
  it("gc --dry-run lists the killed run's agent and stops nothing; gc stops it", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    const pidFile = NodePath.join(side, "pid")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: slow\n    run: echo $$ > ${pidFile}; exec sleep 300\n`
    )
    const first = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidIn(pidFile) !== undefined, 30_000, "the agent to start")
    const pid = pidIn(pidFile)!
    await groupRecorded(repo, "slow")
    first.signal("SIGKILL")
    await first.done
    const listed = `would stop process group ${pid} of a crashed run`
    let dry = await runCli(["gc", "--dry-run"], { cwd: repo })
    for (let tries = 0; !dry.stdout.includes(listed) && tries < 40; tries++) {
      expect(isAlive(pid), dry.stdout).toBe(true)
      await new Promise((resolve) => setTimeout(resolve, 250))
      dry = await runCli(["gc", "--dry-run"], { cwd: repo })
    }
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toContain(listed)
    expect(dry.stdout).not.toContain("stopped process group")
    expect(isAlive(pid), "a dry run stops nothing").toBe(true)
    expect(worktrees(repo)).toHaveLength(2)
    const collected = await runCli(["gc"], { cwd: repo })
    expect(collected.code, collected.stderr).toBe(0)
    expect(collected.stdout).toContain(`stopped process group ${pid} of a crashed run`)
    await waitFor(() => !isAlive(pid), 10_000, "the agent to be stopped")
    expect(worktrees(repo)).toHaveLength(1)
  }, 120_000)
})

describe("gc of a killed run's stray process (end to end)", () => {
  it("gc --dry-run lists an agent's process that left its group, as gc stops it", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    const pidFile = NodePath.join(side, "pid")
    const strayFile = NodePath.join(side, "stray")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: slow\n    run: setsid sleep 300 & echo $! > ${strayFile}; echo $$ > ${pidFile}; exec sleep 300\n`
    )
    const first = startCli(["run", plan], { cwd: repo })
    await waitFor(
      () => pidIn(pidFile) !== undefined && pidIn(strayFile) !== undefined,
      30_000,
      "the agent and its stray to start"
    )
    const stray = pidIn(strayFile)!
    const agent = pidIn(pidFile)!
    onTestFinished(() => {
      for (const pid of [agent, stray]) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // gc stopped it
        }
      }
    })
    await groupRecorded(repo, "slow")
    first.signal("SIGKILL")
    await first.done
    let dry = await runCli(["gc", "--dry-run"], { cwd: repo })
    for (let tries = 0; !dry.stdout.includes("would stop") && tries < 40; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      dry = await runCli(["gc", "--dry-run"], { cwd: repo })
    }
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toContain(`would stop process group ${stray} of a crashed run`)
    expect(isAlive(stray), "a dry run stops nothing").toBe(true)
    const collected = await runCli(["gc"], { cwd: repo })
    expect(collected.code, collected.stderr).toBe(0)
    expect(collected.stdout).toContain(`stopped process group ${stray} of a crashed run`)
    await waitFor(() => !isAlive(stray), 10_000, "the stray to be stopped")
  }, 120_000)
})

describe("plan values never reach git as options (end to end)", () => {
  it("a sparse agent claiming folders that start with '-' checks them out and merges", async () => {
    const repo = makeRepo({
      "README.md": "# r\n",
      "-no-cone/a.txt": "a\n",
      "--stdin/b.txt": "b\n",
      "other/c.txt": "c\n"
    })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: dashes
    sparse: true
    claims: { write: [-no-cone/out.txt, --stdin/out.txt] }
    run: test -e ./-no-cone/a.txt && test -e ./--stdin/b.txt && test ! -e other/c.txt && echo x > ./-no-cone/out.txt && echo y > ./--stdin/out.txt
`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:-no-cone/out.txt`)).toBe("x\n")
    expect(git(repo, "show", `${integration}:--stdin/out.txt`)).toBe("y\n")
    expect(git(repo, "show", `${integration}:other/c.txt`)).toBe("c\n")
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
  })
})

describe("errors are messages (end to end)", () => {
  it("a workspace failure at run start prints what failed, without a stack trace, and exits 1", async () => {
    const repo = makeRepo()
    NodeFs.writeFileSync(NodePath.join(repo, ".git", "corral"), "not a folder")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: a\n    run: echo a > a.txt\n")
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stderr).toContain(NodePath.join(NodeFs.realpathSync(repo), ".git", "corral"))
    expect(result.stderr).toMatch(/^corral: /m)
    expect(result.stderr).not.toMatch(/\n\s+at /)
  })
})

describe("releases off the critical path still complete (end to end)", () => {
  const setup = () => {
    const repo = makeRepo()
    const signals = tempDir("signals-")
    const go = NodePath.join(signals, "go")
    const agents = [
      "  - id: fast\n    run: echo fast > fast.txt\n",
      ...[1, 2].map(
        (i) =>
          `  - id: slow${i}\n${waitingAgent(NodePath.join(signals, `slow${i}`), go).replace("out.txt", `slow${i}.txt`)}`
      )
    ]
    const plan = writePlan(tempDir("plan-"), "plan.yaml", `concurrency: 3\nagents:\n${agents.join("")}`)
    const cli = startCli(["run", plan, "--json"], { cwd: repo })
    const ready = () =>
      waitFor(
        () =>
          NodeFs.existsSync(NodePath.join(signals, "slow1")) &&
          NodeFs.existsSync(NodePath.join(signals, "slow2")) &&
          cli.output().includes(`"type":"Merged"`) &&
          /"type":"Merged","at":\d+,"agentId":"fast"/.test(cli.output()),
        30_000,
        "fast to merge while the slow agents run"
      )
    return { repo, cli, ready }
  }

  it("Ctrl-C after an agent merged: every workspace, pooled or live, is gone when corral exits", async () => {
    const { repo, cli, ready } = setup()
    await ready()
    cli.signal("SIGINT")
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(130)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(branches(repo).filter((b) => b !== "main" && !b.endsWith("/integration"))).toEqual([])
  })

  it("kill -9 after an agent merged: corral gc explains and removes everything that was left", async () => {
    const { repo, cli, ready } = setup()
    await ready()
    cli.signal("SIGKILL")
    await cli.done
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(branches(repo).filter((b) => b !== "main" && !b.endsWith("/integration"))).toEqual([])
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:fast.txt`)).toBe("fast\n")
    expect(gc.stdout).toMatch(/kept branch corral\/.*\/integration: .* holds merged work/)
    expect(
      NodeFs.readdirSync(NodePath.join(repo, ".git", "corral", "runs")).filter((f) => f.endsWith(".json"))
    ).toEqual([])
  })
})

describe("--verbose (end to end)", () => {
  it("prints each agent's git commands and the wall time of its set-up, command, commit, merge and slot", async () => {
    const repo = makeRepo({ "README.md": "# r\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: first
    run: echo one > one.txt
  - id: second
    dependsOn: [first]
    run: cat one.txt > two.txt
`
    )
    const result = await runCli(["run", plan, "--verbose"], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const output = result.stdout + result.stderr
    for (const agent of ["first", "second"]) {
      const row = new RegExp(
        `^ {2}${agent}\\s+\\d+ commands\\s+\\d+ ms\\s+set-up\\s+\\d+ ms\\s+command\\s+\\d+ ms\\s+commit\\s+\\d+ ms\\s+merge\\s+\\d+ ms\\s+slot\\s+\\d+ ms$`,
        "m"
      )
      expect(output).toMatch(row)
    }
    expect(output).toMatch(/^ {2}\(run\)\s+\d+ commands\s+\d+ ms$/m)
  })
})

describe("a worktree lent at its agent's commit (end to end)", () => {
  /**
   * With `CORRAL_POOL_SPARES=0` the next agent waits for the lent worktree and runs in it; by default
   * it adds a spare worktree while the first agent's commit runs, unless the lend was quicker (either
   * way, gc explains what the kill leaves).
   */
  for (const spares of ["0", "default"] as const) {
    it(`kill -9 while the next agent runs (spares: ${spares}) and the first's work is not merged: gc explains everything`, async () => {
      const repo = makeRepo()
      const signals = tempDir("signals-")
      const started = NodePath.join(signals, "b-started")
      const go = NodePath.join(signals, "go")
      const ended = NodePath.join(signals, "b-ended")
      const plan = writePlan(
        tempDir("plan-"),
        "plan.yaml",
        `concurrency: 1
agents:
  - id: a
    run: echo a > a.txt
  - id: b
    run: touch ${started}; while [ ! -e ${go} ]; do sleep 0.05; done; touch ${ended}
`
      )
      const cli = startCli(["run", plan, "--json"], {
        cwd: repo,
        env: {
          CORRAL_TEST_WAIT_AT: `merging:a:${NodePath.join(signals, "never")}`,
          ...(spares === "0" ? { CORRAL_POOL_SPARES: "0" } : {})
        }
      })
      await waitFor(() => NodeFs.existsSync(started), 30_000, "b to start while a waits before its merge")
      const live = worktrees(repo)
      if (spares === "0") expect(live).toHaveLength(2)
      else expect([2, 3]).toContain(live.length)
      expect(live.some((dir) => dir.endsWith(`${NodePath.sep}b`))).toBe(true)
      const runBranch = branches(repo).find((b) => b.endsWith("/a"))!
      expect(git(repo, "show", `${runBranch}:a.txt`)).toBe("a\n")
      const integration = branches(repo).find((b) => b.endsWith("/integration"))!
      expect(() => git(repo, "show", `${integration}:a.txt`)).toThrow()
      cli.signal("SIGKILL")
      await cli.done
      NodeFs.writeFileSync(go, "")
      await waitFor(() => NodeFs.existsSync(ended), 30_000, "b's command to end")
      const gc = await runCli(["gc"], { cwd: repo })
      expect(gc.code, gc.stdout + gc.stderr).toBe(0)
      expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
      expect(branches(repo).filter((b) => b !== "main")).toEqual([runBranch])
      expect(gc.stdout).toContain(`kept branch ${runBranch}`)
      expect(git(repo, "show", `${runBranch}:a.txt`)).toBe("a\n")
    })
  }
})

describe("port blocks (end to end)", () => {
  it("a block that cannot be held machine-wide gives one warning per run naming it", async () => {
    const repo = makeRepo()
    const dir = tempDir("refuse-")
    const refuse = refusePortsPreload(dir)
    const plan = writePlan(
      dir,
      "plan.yaml",
      `isolation: none\nagents:\n${["one", "two", "three"].map((id) => `  - id: ${id}\n    run: echo "$PORT" > ${dir}/${id}.port\n`).join("")}`
    )
    const notices = (stdout: string) =>
      jsonEvents(stdout).filter((event) => event.type === "Notice" && /port block/.test(event.message))
    const refused = await runCli(["run", plan, "--json"], {
      cwd: repo,
      env: { NODE_OPTIONS: `--import ${refuse}` }
    })
    expect(refused.code, refused.stderr).toBe(0)
    const ports = ["one", "two", "three"].map((id) =>
      NodeFs.readFileSync(NodePath.join(dir, `${id}.port`), "utf8").trim()
    )
    const first = Math.min(...ports.map(Number))
    expect(first).toBe(20000)
    expect(notices(refused.stdout).map((event) => event.message)).toEqual([portBlockWarning(first)])
    const held = await runCli(["run", plan, "--json"], { cwd: repo })
    expect(held.code, held.stderr).toBe(0)
    expect(notices(held.stdout)).toEqual([])
  })
})
