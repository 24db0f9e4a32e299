import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { DatabaseSync } from "node:sqlite"
import { width as stringWidth } from "../../apps/cli/src/TerminalText.ts"
import { describe, expect, it } from "vitest"
import {
  branches,
  git,
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

const runIdOf = (repo: string): string => {
  const id = execFileSync(NodePath.join(import.meta.dirname, "../../apps/cli/bin/corral"), ["runs"], {
    cwd: repo,
    encoding: "utf8"
  }).split(" ")[0]!
  return id
}

/** A repository and a plan whose one agent, `gen`, is cached by the hash of its `inputs`. */
const cachedGenPlan = () => {
  const repo = makeRepo({ "README.md": "# test\n", "src/input.txt": "one\n" })
  const plan = writePlan(
    tempDir("plan-"),
    "plan.yaml",
    "agents:\n  - id: gen\n    inputs: [src/input.txt]\n    run: echo generated > gen.txt\n"
  )
  return { repo, plan }
}

/** `gen`'s outcome in each run the ledger records, by run id. */
const genOutcomes = (repo: string) => {
  const ledger = new DatabaseSync(NodePath.join(repo, ".corral", "ledger.db"))
  try {
    return Object.fromEntries(
      ledger
        .prepare("SELECT run_id AS runId, outcome FROM agents WHERE agent_id = 'gen'")
        .all()
        .map((row) => [row["runId"], row["outcome"]])
    )
  } finally {
    ledger.close()
  }
}

describe("corral status, logs and report (end to end)", () => {
  it("status shows live states during a run, logs follows an agent, report writes into the run's folder", async () => {
    const repo = makeRepo()
    const gate = `${tempDir("gate-")}/go`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 3
agents:
  - id: holder
    run: sh -c 'echo holding; while [ ! -e ${gate} ]; do sleep 0.05; done; echo released'
    claims: { write: [shared.txt] }
  - id: waiter
    run: echo waited
    claims: { write: [shared.txt] }
  - id: follower
    run: echo followed
    dependsOn: [holder]
`
    )
    const cli = startCli(["run", plan], { cwd: repo })
    const status = async () => (await runCli(["status"], { cwd: repo })).stdout
    let live = ""
    await waitFor(
      () => {
        try {
          live = execFileSync(NodePath.join(import.meta.dirname, "../../apps/cli/bin/corral"), ["status"], {
            cwd: repo,
            encoding: "utf8"
          })
        } catch {
          return false
        }
        return /waiter\s+waiting for shared\.txt \(write, held by holder\)/.test(live)
      },
      30_000,
      "the waiter to be waiting"
    )
    expect(live).toMatch(/: running, plan /)
    expect(live).toMatch(/holder\s+running \d+\.\ds, attempt 1/)
    expect(live).toMatch(/follower\s+waiting for holder to finish/)
    expect(live).not.toMatch(/pending/)
    const follow = startCli(["logs", "holder", "--follow"], { cwd: repo })
    await waitFor(() => follow.output().includes("holding"), 20_000, "the followed output")
    NodeFs.writeFileSync(gate, "")
    const followed = await follow.done
    expect(followed.code).toBe(0)
    expect(followed.stdout).toMatch(/holding[\s\S]*released/)
    expect(followed.stderr).toMatch(/^run \S+/)
    expect((await cli.done).code).toBe(0)
    const done = await status()
    expect(done).toMatch(/holder\s+succeeded in \d+\.\ds, attempt 1/)
    expect(done).toMatch(/follower\s+succeeded/)
    const runId = runIdOf(repo)
    const report = await runCli(["report"], { cwd: repo })
    expect(report.code, report.stderr).toBe(0)
    const dir = NodePath.join(NodeFs.realpathSync(repo), ".corral", "runs", runId)
    expect(report.stdout).toContain(`report: ${NodePath.join(dir, "report.html")}`)
    expect(report.stdout).toContain(`trace: ${NodePath.join(dir, "trace.json")}`)
    expect(NodeFs.existsSync(NodePath.join(dir, "report.html"))).toBe(true)
    expect(JSON.parse(NodeFs.readFileSync(NodePath.join(dir, "trace.json"), "utf8"))).toBeTruthy()
  })

  it("logs names the real problem and never reads a path it was given", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: tests\n    run: echo from-tests\n")
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const runId = runIdOf(repo)
    const latest = await runCli(["logs", "tests"], { cwd: repo })
    expect(latest.code).toBe(0)
    expect(latest.stdout).toContain("from-tests")
    expect(latest.stderr).toContain(`run ${runId}`)
    const explicit = await runCli(["logs", runId, "tests"], { cwd: repo })
    expect(explicit.stdout).toContain("from-tests")
    const bogus = await runCli(["logs", "bogus-run", "tests"], { cwd: repo })
    expect(bogus.code).toBe(2)
    expect(bogus.stderr).toContain(`no such run "bogus-run"; recent run: ${runId} (corral runs lists it)`)
    const outside = NodePath.join(repo, ".corral", "x")
    const pathLike = await runCli(["logs", "../x", "tests"], { cwd: repo })
    expect(pathLike.code).toBe(2)
    expect(pathLike.stderr).toMatch(/no such run "\.\.\/x"; recent run: /)
    expect(NodeFs.existsSync(outside)).toBe(false)
    const secret = NodePath.join(tempDir("secret-"), "private.log")
    NodeFs.writeFileSync(secret, "PRIVATE\n")
    const relative = NodePath.relative(NodePath.join(repo, ".corral", "runs", runId, "logs"), secret.slice(0, -4))
    const escaped = await runCli(["logs", runId, relative], { cwd: repo })
    expect(escaped.code).toBe(2)
    expect(escaped.stdout + escaped.stderr).not.toContain("PRIVATE")
    expect(escaped.stderr).toMatch(/has no agent .*; its agents: tests/)
    const none = await runCli(["logs"], { cwd: repo })
    expect(none.code).toBe(2)
    expect(none.stderr).toMatch(/which agent\?.*tests/)
    expect(none.stderr).not.toMatch(/USAGE/)
  })

  it("logs --follow ends when the run's process is gone (kill -9), saying so, instead of waiting forever", async () => {
    const repo = makeRepo()
    const pids = tempDir("pids-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: long\n    run: echo $$ > ${pids}/long; echo begun; exec sleep 300\n`
    )
    const run = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidIn(NodePath.join(pids, "long")) !== undefined, 20_000, "the agent to start")
    const agent = pidIn(NodePath.join(pids, "long"))!
    try {
      const follow = startCli(["logs", "long", "--follow"], { cwd: repo })
      await waitFor(() => follow.output().includes("begun"), 20_000, "the followed output")
      run.signal("SIGKILL")
      await run.done
      const ended = await Promise.race([
        follow.done,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 15_000))
      ])
      expect(ended, "logs --follow still waits for a run whose process is gone").toBeDefined()
      expect(ended!.stderr).toMatch(/is gone/)
    } finally {
      process.kill(-agent, "SIGKILL")
    }
  })

  it("a timed-out agent: one wording everywhere and a trailer in its log", async () => {
    const repo = makeRepo()
    // 3 s: the worktree and the agent's process start well before it at any load (a 1 s timeout could
    // end the agent before its process, and its log, existed)
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: slow\n    run: echo begun; sleep 30\n    timeout: 3s\n"
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(1)
    expect(result.stdout).toMatch(/slow: timed out after 3\.0s/)
    expect(result.stdout).toMatch(/│ slow\s+│ timed out\s+│.*after 3\.0s/)
    expect(result.stdout + result.stderr).not.toMatch(/timedout|TimedOut|3000ms/)
    const log = await runCli(["logs", "slow"], { cwd: repo })
    expect(log.stdout, "the agent's process started before the timeout").toContain("begun")
    expect(log.stdout.trim().split("\n").at(-1)).toBe("[corral] timed out after 3.0s")
    const status = await runCli(["status"], { cwd: repo })
    expect(status.stdout).toMatch(/slow\s+timed out in \d+\.\ds, attempt 1 — after 3\.0s/)
  })
})

describe("the end-of-run summary (end to end)", () => {
  it("fits 80 columns, prints what to copy in full on its own line, and says 'merged work' only when something merged", async () => {
    const repo = makeRepo({ "README.md": "line 1\nline 2\nline 3\n" })
    NodeFs.writeFileSync(NodePath.join(repo, "README.md"), "changed but not committed\n")
    const id = (name: string) => `${name}-with-a-rather-long-descriptive-agent-identifier`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 3
agents:
  - id: ${id("first")}
    run: printf 'line 1\\nfirst\\nline 3\\n' > README.md
  - id: ${id("second")}
    run: printf 'line 1\\nsecond\\nline 3\\n' > README.md
    dependsOn: []
  - id: ${id("third")}
    run: echo "a failure message that is long enough to need wrapping on a narrow terminal" >&2; exit 3
`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(1)
    const lines = result.stdout.split("\n")
    const summary = lines.slice(lines.findIndex((line) => line.startsWith("┌")))
    const copyLines = summary.filter((line) => /^ {2}\S+( \S+)*$/.test(line))
    for (const line of summary.filter((line) => !copyLines.includes(line)))
      expect(stringWidth(line), line).toBeLessThanOrEqual(80)
    const runId = runIdOf(repo)
    const kept = branches(repo).find((b) => b.startsWith(`corral/${runId}/`) && !b.endsWith("/integration"))!
    expect(kept).toMatch(/(first|second)-with-a-rather-long-descriptive-agent-identifier$/)
    expect(lines).toContain(`  ${kept}`)
    expect(result.stdout).toMatch(/third-with-a-rather-long-descriptive-agent-identifier: .*exit/)
    expect(branches(repo)).toContain(kept)
    const integration = `corral/${runId}/integration`
    expect(lines).toContain(`  git merge ${integration}`)
    expect(result.stdout.match(/uncommitted changes/g)?.length).toBe(1)
    const nothing = writePlan(tempDir("plan-"), "nothing.yaml", "agents:\n  - id: idle\n    run: 'true'\n")
    const idle = await runCli(["run", nothing], { cwd: repo })
    expect(idle.code).toBe(0)
    expect(idle.stdout).not.toMatch(/merged work|git merge/)
  })

  it("no early conflict warning for a change already in the other agent's base, and never 'integration' as an agent", async () => {
    const repo = makeRepo({ "README.md": "line 1\nline 2\nline 3\n", "src/a.txt": "a\n" })
    const marks = tempDir("marks-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 3
agents:
  - id: readme-x
    run: printf 'line 1\\nfrom x\\nline 3\\n' > README.md
  - id: rogue-b
    run: sh -c 'while [ ! -e ${marks}/upper-started ]; do sleep 0.05; done; printf "line 1\\nfrom b\\nline 3\\n" > README.md'
  - id: add-upper
    dependsOn: [readme-x]
    run: sh -c 'touch ${marks}/upper-started; echo upper > src/a.txt; while [ ! -e ${marks}/release ]; do sleep 0.05; done'
`
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => /rogue-b: failed/.test(cli.output()), 30_000, "rogue-b to finish")
    NodeFs.writeFileSync(NodePath.join(marks, "release"), "")
    const result = await cli.done
    expect(result.code).toBe(1)
    expect(result.stdout).toMatch(/rogue-b: merge conflict in README\.md/)
    expect(result.stdout).not.toMatch(/likely to conflict/)
    expect(result.stdout + result.stderr).not.toMatch(/and integration|integration and/)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
  })
})

describe("corral discard and init (end to end)", () => {
  /** The run registry's files of `runId` (`<git-common-dir>/corral/runs/<runId>.*`). */
  const registryFiles = (repo: string, runId: string) => {
    const dir = NodePath.join(repo, ".git", "corral", "runs")
    return NodeFs.existsSync(dir) ? NodeFs.readdirSync(dir).filter((name) => name.startsWith(`${runId}.`)) : []
  }

  it("discard removes a run's branches, worktrees and folder after confirmation, never the user's branches", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: writer\n    run: echo work > out.txt\n  - id: broken\n    run: echo partial > part.txt; exit 1\n"
    )
    expect((await runCli(["run", plan, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const runId = runIdOf(repo)
    expect(branches(repo).filter((b) => b.startsWith(`corral/${runId}/`)).length).toBeGreaterThan(0)
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.stdout).toMatch(/corral discard <run-id>/)
    git(repo, "branch", "corral/notes")
    const declined = startCli(["discard", runId], { cwd: repo })
    const declinedResult = await declined.done
    expect(declinedResult.code).toBe(1)
    expect(declinedResult.stdout).toMatch(/nothing removed/)
    expect(branches(repo).some((b) => b.startsWith(`corral/${runId}/`))).toBe(true)
    const result = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(new RegExp(`removed branch corral/${runId}/integration`))
    expect(result.stdout).toMatch(/removed worktree /)
    expect(branches(repo).filter((b) => b.startsWith(`corral/${runId}/`))).toEqual([])
    expect(branches(repo)).toContain("corral/notes")
    expect(branches(repo)).toContain("main")
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "runs", runId))).toBe(false)
    expect(registryFiles(repo, runId)).toEqual([])
    const runs = await runCli(["runs"], { cwd: repo })
    expect(runs.stdout).toMatch(new RegExp(`${runId}\\s+discarded`))
    const again = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(again.code).toBe(2)
  })

  /** Starts a run whose agent waits on a fifo, kills the run with SIGKILL, and returns the agent's (orphaned) pid. */
  const killBlockedRun = async (repo: string) => {
    const signals = tempDir("signals-")
    const pidFile = NodePath.join(signals, "pid")
    const go = NodePath.join(signals, "go")
    execFileSync("mkfifo", [go])
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: slow\n    run: echo wip > wip.txt; echo $$ > ${pidFile}; read line < ${go}\n`
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidIn(pidFile) !== undefined, 30_000, "the agent to start")
    cli.signal("SIGKILL")
    await cli.done
    return pidIn(pidFile)!
  }

  /** Places a run on another host in the ledger and in its lease, whose last heartbeat was an hour ago. */
  const moveToStaleHost = (repo: string, runId: string) => {
    const ledger = new DatabaseSync(NodePath.join(repo, ".corral", "ledger.db"))
    ledger.prepare("UPDATE runs SET hostname = 'elsewhere' WHERE run_id = ?").run(runId)
    ledger.close()
    const lease = NodePath.join(repo, ".git", "corral", "runs", `${runId}.json`)
    const ago = Date.now() - 3_600_000
    NodeFs.writeFileSync(lease, JSON.stringify({ pid: 1, hostname: "elsewhere", startedAt: ago, heartbeatAt: ago }))
  }

  it("runs, status, logs --follow and gc judge a run the ledger places on another host by its lease: a stale one crashed", async () => {
    const repo = makeRepo()
    const agent = await killBlockedRun(repo)
    try {
      const runId = runIdOf(repo)
      moveToStaleHost(repo, runId)
      const runs = await runCli(["runs"], { cwd: repo })
      expect(runs.stdout).toMatch(new RegExp(`${runId}\\s+crashed`))
      const status = await runCli(["status", runId], { cwd: repo })
      expect(status.stdout).toMatch(
        new RegExp(`^run ${runId}: crashed \\(coordinator pid \\d+ on elsewhere is gone\\)`, "m")
      )
      const follow = startCli(["logs", runId, "slow", "--follow"], { cwd: repo })
      let ended = false
      void follow.done.then(() => (ended = true))
      await waitFor(() => ended, 30_000, "logs --follow of the crashed run to end")
      const followed = await follow.done
      expect(followed.code, followed.stderr).toBe(0)
      expect(followed.stderr).toContain(`run ${runId} crashed (coordinator pid`)
      const gc = await runCli(["gc"], { cwd: repo })
      expect(gc.code, gc.stdout + gc.stderr).toBe(0)
      expect(gc.stdout).toMatch(/stopped process group \d+ of a crashed run/)
      expect(isAlive(agent)).toBe(false)
    } finally {
      if (isAlive(agent)) process.kill(agent, "SIGKILL")
    }
  }, 120_000)

  it("discard after kill -9 removes the run's records and lease, also when the ledger's host cannot tell it is dead", async () => {
    const repo = makeRepo()
    const agent = await killBlockedRun(repo)
    try {
      const runId = runIdOf(repo)
      expect(registryFiles(repo, runId).sort()).toEqual([`${runId}.json`, `${runId}.records`])
      const ledger = new DatabaseSync(NodePath.join(repo, ".corral", "ledger.db"))
      ledger.prepare("UPDATE runs SET hostname = 'elsewhere' WHERE run_id = ?").run(runId)
      ledger.close()
      const result = await runCli(["discard", runId, "--yes"], { cwd: repo })
      expect(result.code, result.stdout + result.stderr).toBe(0)
      expect(result.stdout).toContain(`removed ${NodePath.join(repo, ".git", "corral", "runs", `${runId}.records`)}`)
      expect(registryFiles(repo, runId)).toEqual([])
      expect(isAlive(agent)).toBe(false)
      expect(branches(repo)).toEqual(["main"])
      expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
      const gc = await runCli(["gc", "--dry-run"], { cwd: repo })
      expect(gc.stdout).toMatch(/^0 would remove, 0 kept$/m)
    } finally {
      if (isAlive(agent)) process.kill(agent, "SIGKILL")
    }
  }, 120_000)

  it("discard refuses a run whose lease is live though its ledger row ended: exit 2, nothing touched", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: broken\n    run: echo partial > part.txt; exit 1\n"
    )
    expect((await runCli(["run", plan, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const runId = runIdOf(repo)
    const lease = NodePath.join(repo, ".git", "corral", "runs", `${runId}.json`)
    const now = Date.now()
    NodeFs.writeFileSync(
      lease,
      JSON.stringify({ pid: process.pid, hostname: NodeOs.hostname(), startedAt: now, heartbeatAt: now })
    )
    const before = { branches: branches(repo), worktrees: worktrees(repo), files: registryFiles(repo, runId) }
    const refused = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(`run ${runId} is still running (pid ${process.pid} on ${NodeOs.hostname()}`)
    expect(refused.stdout).toBe("")
    expect({ branches: branches(repo), worktrees: worktrees(repo), files: registryFiles(repo, runId) }).toEqual(before)
    const runs = await runCli(["runs"], { cwd: repo })
    expect(runs.stdout).not.toMatch(new RegExp(`${runId}\\s+discarded`))
    NodeFs.writeFileSync(
      lease,
      JSON.stringify({ pid: process.pid, hostname: "elsewhere", startedAt: 0, heartbeatAt: now - 3_600_000 })
    )
    const stale = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(stale.code, stale.stdout + stale.stderr).toBe(0)
    expect(registryFiles(repo, runId)).toEqual([])
    expect(branches(repo)).toEqual(["main"])
  })

  it("discard --all-merged removes only runs that succeeded", async () => {
    const repo = makeRepo()
    const good = writePlan(tempDir("plan-"), "good.yaml", "agents:\n  - id: ok\n    run: echo ok > ok.txt\n")
    const bad = writePlan(
      tempDir("plan-"),
      "bad.yaml",
      "agents:\n  - id: no\n    run: echo partial > part.txt; exit 1\n"
    )
    expect((await runCli(["run", good], { cwd: repo })).code).toBe(0)
    const goodId = runIdOf(repo)
    expect((await runCli(["run", bad, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const badId = runIdOf(repo)
    // a run that merged nothing leaves no integration branch; its failed agent's kept branch is its leftover
    expect(branches(repo)).not.toContain(`corral/${badId}/integration`)
    expect(branches(repo)).toContain(`corral/${badId}/no`)
    const result = await runCli(["discard", "--all-merged", "--yes"], { cwd: repo })
    expect(result.code, result.stderr).toBe(0)
    expect(branches(repo)).not.toContain(`corral/${goodId}/integration`)
    expect(branches(repo)).toContain(`corral/${badId}/no`)
  })

  it("gc and discard --older-than: an age they cannot read is exit 2 naming the flag, nothing touched; a read one selects by age", async () => {
    const repo = makeRepo()
    const bad = writePlan(
      tempDir("plan-"),
      "bad.yaml",
      "agents:\n  - id: no\n    run: echo partial > part.txt; exit 1\n"
    )
    expect((await runCli(["run", bad, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const runId = runIdOf(repo)
    const before = branches(repo)
    expect(before).toContain(`corral/${runId}/no`)
    for (const args of [
      ["gc", "--older-than", "7x"],
      ["discard", "--older-than", "7 days", "--yes"]
    ]) {
      const refused = await runCli(args, { cwd: repo })
      expect(refused.code, args.join(" ")).toBe(2)
      expect(refused.stderr, args.join(" ")).toContain(`--older-than ${args[2]}: expected a number with a unit`)
      expect(branches(repo), args.join(" ")).toEqual(before)
    }
    const tooYoung = await runCli(["discard", "--older-than", "1w", "--yes"], { cwd: repo })
    expect(tooYoung.code, tooYoung.stderr).toBe(0)
    expect(branches(repo)).toEqual(before)
    const old = await runCli(["discard", "--older-than", "0ms", "--yes"], { cwd: repo })
    expect(old.code, old.stderr).toBe(0)
    expect(branches(repo).filter((b) => b.startsWith(`corral/${runId}/`))).toEqual([])
  })

  it("gc --older-than counts a run that ended normally from its end: a merged integration branch of a run just ended stays", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: yes\n    run: echo done > done.txt\n")
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const runId = runIdOf(repo)
    git(repo, "merge", "--quiet", `corral/${runId}/integration`)
    const young = await runCli(["gc", "--older-than", "1w"], { cwd: repo })
    expect(young.code, young.stderr).toBe(0)
    expect(young.stdout).not.toContain(runId)
    expect(branches(repo)).toContain(`corral/${runId}/integration`)
    const old = await runCli(["gc", "--older-than", "0ms"], { cwd: repo })
    expect(old.code, old.stderr).toBe(0)
    expect(branches(repo)).not.toContain(`corral/${runId}/integration`)
  })

  it("gc --older-than counts a run with no worktree (directory copies, nothing in the run registry) from its end in the ledger, not from when its copies were made", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: no\n    run: echo partial > part.txt; exit 1\n"
    )
    expect((await runCli(["run", plan, "--isolation", "directory", "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const runId = runIdOf(repo)
    const copies = NodePath.join(repo, ".corral", "worktrees", runId)
    expect(NodeFs.readdirSync(copies)).toEqual(["no"])
    expect(
      NodeFs.existsSync(NodePath.join(NodeFs.realpathSync(repo), ".git", "corral", "runs", `${runId}.records`))
    ).toBe(false)
    const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000)
    NodeFs.utimesSync(copies, twoDaysAgo, twoDaysAgo)
    const young = await runCli(["gc", "--older-than", "1d", "--dry-run"], { cwd: repo })
    expect(young.code, young.stderr).toBe(0)
    expect(young.stdout, "the run ended just now").not.toContain(runId)
    const old = await runCli(["gc", "--older-than", "0ms", "--dry-run"], { cwd: repo })
    expect(old.code, old.stderr).toBe(0)
    expect(old.stdout).toContain(`kept directory ${NodeFs.realpathSync(copies)}/no: not a registered git worktree`)
  })

  it("a discarded run's successes are not reused: a later run with unchanged inputs runs the agent again", async () => {
    const { repo, plan } = cachedGenPlan()
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const first = runIdOf(repo)
    const discarded = await runCli(["discard", first, "--yes"], { cwd: repo })
    expect(discarded.code, discarded.stdout + discarded.stderr).toBe(0)
    const second = await runCli(["run", plan], { cwd: repo })
    expect(second.code, second.stdout + second.stderr).toBe(0)
    const secondId = runIdOf(repo)
    expect(secondId).not.toBe(first)
    expect(git(repo, "show", `corral/${secondId}/integration:gen.txt`)).toBe("generated\n")
    git(repo, "merge", "--quiet", "--ff-only", `corral/${secondId}/integration`)
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    expect(genOutcomes(repo)).toEqual({ [first]: "Succeeded", [secondId]: "Succeeded", [runIdOf(repo)]: "Cached" })
  })

  it("a success whose work the new run's base lacks is not reused: the agent runs again; once merged it is cached", async () => {
    const { repo, plan } = cachedGenPlan()
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const first = runIdOf(repo)
    const second = await runCli(["run", plan], { cwd: repo })
    expect(second.code, second.stdout + second.stderr).toBe(0)
    const secondId = runIdOf(repo)
    expect(git(repo, "show", `corral/${secondId}/integration:gen.txt`)).toBe("generated\n")
    git(repo, "merge", "--quiet", "--ff-only", `corral/${secondId}/integration`)
    const third = await runCli(["run", plan], { cwd: repo })
    expect(third.code, third.stdout + third.stderr).toBe(0)
    const thirdId = runIdOf(repo)
    // its only agent was cached: the run merged nothing, so it leaves no integration branch
    expect(branches(repo)).not.toContain(`corral/${thirdId}/integration`)
    expect(git(repo, "show", "HEAD:gen.txt")).toBe("generated\n")
    expect(genOutcomes(repo)).toEqual({ [first]: "Succeeded", [secondId]: "Succeeded", [thirdId]: "Cached" })
  })

  it("discard removes a branch the run registry recorded though the ledger does not know its agent", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: broken\n    run: exit 1\n")
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(1)
    const runId = runIdOf(repo)
    const orphan = `corral/${runId}/unrecorded`
    git(repo, "branch", orphan)
    NodeFs.appendFileSync(
      NodePath.join(repo, ".git", "corral", "runs", `${runId}.records`),
      `${JSON.stringify({ branch: orphan })}\n`
    )
    git(repo, "branch", `corral/${runId}/not-recorded`)
    const result = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain(`removed branch ${orphan}`)
    expect(branches(repo).sort()).toEqual([`corral/${runId}/not-recorded`, "main"])
  })

  it("report and logs of a discarded run create nothing and exit 2, saying it was discarded", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: ok\n    run: echo ok > ok.txt\n")
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const runId = runIdOf(repo)
    expect((await runCli(["discard", runId, "--yes"], { cwd: repo })).code).toBe(0)
    const folder = NodePath.join(repo, ".corral", "runs", runId)
    expect(NodeFs.existsSync(folder)).toBe(false)
    const report = await runCli(["report", runId], { cwd: repo })
    expect(report.code).toBe(2)
    expect(report.stderr).toContain(`run ${runId} was discarded`)
    expect(NodeFs.existsSync(folder)).toBe(false)
    const latest = await runCli(["report"], { cwd: repo })
    expect(latest.code).toBe(2)
    expect(NodeFs.existsSync(folder)).toBe(false)
    for (const args of [
      ["logs", runId, "ok"],
      ["logs", "ok"],
      ["logs", runId, "ok", "--follow"]
    ]) {
      const logs = await runCli(args, { cwd: repo })
      expect(logs.code, args.join(" ")).toBe(2)
      expect(logs.stderr, args.join(" ")).toContain(`run ${runId} was discarded`)
      expect(logs.stderr, args.join(" ")).not.toContain("without starting a process")
    }
    expect(NodeFs.existsSync(folder)).toBe(false)
  })

  it("init writes a valid commented starter plan with the top-level folders as claims, and never overwrites", async () => {
    const repo = makeRepo({ "README.md": "# r\n", "src/a.ts": "a\n", "docs/b.md": "b\n", ".github/c.yml": "c\n" })
    const result = await runCli(["init"], { cwd: repo })
    expect(result.code, result.stderr).toBe(0)
    const text = NodeFs.readFileSync(NodePath.join(repo, "corral.yaml"), "utf8")
    expect(text).toMatch(/^# /)
    expect(text).toContain('claims: { write: ["src/"] }')
    expect(text).toContain('claims: { write: ["docs/"] }')
    expect(text).not.toContain(".github")
    const valid = await runCli(["validate", "corral.yaml"], { cwd: repo })
    expect(valid.code, valid.stderr).toBe(0)
    const ran = await runCli(["run", "corral.yaml"], { cwd: repo })
    expect(ran.code, ran.stdout + ran.stderr).toBe(0)
    NodeFs.writeFileSync(NodePath.join(repo, "corral.yaml"), "mine\n")
    const again = await runCli(["init"], { cwd: repo })
    expect(again.code).toBe(2)
    expect(again.stderr).toMatch(/already exists/)
    expect(NodeFs.readFileSync(NodePath.join(repo, "corral.yaml"), "utf8")).toBe("mine\n")
  })

  it("init --file: the plan's comments name that file; a JSON name or a missing folder is exit 2, nothing written", async () => {
    const repo = makeRepo({ "README.md": "# r\n", "src/a.ts": "a\n" })
    const named = await runCli(["init", "--file", "nightly.yml"], { cwd: repo })
    expect(named.code, named.stderr).toBe(0)
    const text = NodeFs.readFileSync(NodePath.join(repo, "nightly.yml"), "utf8")
    expect(text).toContain("corral validate nightly.yml")
    expect(text).toContain("corral run nightly.yml")
    expect(text).not.toContain("corral.yaml")
    const json = await runCli(["init", "--file", "plan.json"], { cwd: repo })
    expect(json.code).toBe(2)
    expect(json.stderr).toContain("plan.json")
    expect(json.stderr).toMatch(/\.yaml/)
    expect(NodeFs.existsSync(NodePath.join(repo, "plan.json"))).toBe(false)
    const missing = await runCli(["init", "--file", "no/such/plan.yaml"], { cwd: repo })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/no such folder/)
  })
})

describe("corral gc where it cannot work (end to end)", () => {
  it("outside a git repository, or without git on PATH, exits 2 with the command's words", async () => {
    const plain = tempDir("not-git-")
    const notGit = await runCli(["gc", "--repo", plain], { cwd: plain })
    expect(notGit.code, notGit.stderr).toBe(2)
    expect(notGit.stderr).toMatch(/not inside a git repository/)
    expect(notGit.stderr, "the command's words, not the library's").not.toContain("strategy")
    const bin = tempDir("no-git-bin-")
    for (const tool of ["sh", "readlink", "dirname"]) {
      const found = execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim()
      NodeFs.symlinkSync(found, NodePath.join(bin, tool))
    }
    const repo = makeRepo()
    const noGit = await runCli(["gc"], { cwd: repo, env: { PATH: bin } })
    expect(noGit.code, noGit.stderr).toBe(2)
    expect(noGit.stderr).toContain("git executable was not found")
  })
})

describe("the report's critical path (end to end)", () => {
  it("follows the run's real waits — claims as well as dependencies — not the lone slow agent", async () => {
    const repo = makeRepo()
    const gate = `${tempDir("gate-")}/go`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 3
agents:
  - id: holder
    run: sh -c 'while [ ! -e ${gate} ]; do sleep 0.05; done'
    claims: { write: [shared.txt] }
  - id: waiter
    run: echo waited > waited.txt
    claims: { write: [shared.txt] }
  - id: lone
    run: sleep 30
    timeout: 1s
`
    )
    const cli = startCli(["run", plan, "--report"], { cwd: repo })
    await waitFor(() => /lone: timed out/.test(cli.output()), 30_000, "lone to time out")
    NodeFs.writeFileSync(gate, "")
    expect((await cli.done).code).toBe(1)
    const runId = runIdOf(repo)
    const dir = NodePath.join(repo, ".corral", "runs", runId)
    const trace = JSON.parse(NodeFs.readFileSync(NodePath.join(dir, "trace.json"), "utf8")) as {
      traceEvents: ReadonlyArray<{ name: string; args?: { criticalPath?: boolean } }>
    }
    const critical = new Set(trace.traceEvents.filter((e) => e.args?.criticalPath === true).map((e) => e.name))
    expect([...critical].sort()).toEqual(["holder", "waiter"])
    const html = NodeFs.readFileSync(NodePath.join(dir, "report.html"), "utf8")
    expect(html).toContain("critical path (holder → waiter)")
    expect(html).toMatch(/each agent on it waited for the one before \(a dependency, or a claim it held\)/)
  })
})
