import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { overlayProblem } from "@corral/platform-node/Workspace"
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

// With CI=true a machine that cannot mount an overlay runs these tests and fails them; elsewhere they are skipped.
const enabled = overlayProblem() === undefined || process.env.CI === "true"

const files = {
  "README.md": "# r\n",
  "src/a/one.txt": "one\n",
  "src/b/two.txt": "two\n",
  "CHANGELOG.md": "log\n"
}

describe.skipIf(!enabled)("overlay workspaces (end to end)", () => {
  it("overlay agents see their start commit, merge like worktree agents, and leave nothing behind", async () => {
    const repo = makeRepo(files)
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `concurrency: 2
agents:
  - id: a
    overlay: true
    claims: { write: [src/a/, CHANGELOG.md] }
    run: test "$(cat src/b/two.txt)" = two && echo more >> src/a/one.txt && echo a >> CHANGELOG.md && echo x > scratch.log
  - id: b
    overlay: true
    claims: { write: [src/b/, CHANGELOG.md] }
    run: rm src/b/two.txt && echo new > src/b/three.txt && echo b >> CHANGELOG.md
  - id: check
    overlay: true
    dependsOn: [a, b]
    run: test -e src/b/three.txt && test ! -e src/b/two.txt && grep -q more src/a/one.txt && git status --porcelain --untracked-files=no > status.txt
`
    )
    NodeFs.writeFileSync(NodePath.join(repo, ".gitignore"), "*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "ignore")
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:src/a/one.txt`)).toBe("one\nmore\n")
    expect(git(repo, "show", `${integration}:src/b/three.txt`)).toBe("new\n")
    expect(git(repo, "show", `${integration}:status.txt`)).toBe("")
    const log = git(repo, "show", `${integration}:CHANGELOG.md`)
    expect(log === "log\na\nb\n" || log === "log\nb\na\n", log).toBe(true)
    expect(git(repo, "ls-tree", "-r", "--name-only", integration)).not.toContain("scratch.log")
    expect(git(repo, "ls-tree", "-r", "--name-only", integration)).not.toContain("src/b/two.txt")
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "overlay"))).toBe(false)
    expect(git(repo, "status", "--porcelain")).toBe("")
  }, 120_000)

  it("Ctrl-C mid-agent and a failing agent: every overlay workspace and snapshot is gone when corral exits", async () => {
    const repo = makeRepo(files)
    const signals = tempDir("signals-")
    const started = NodePath.join(signals, "started")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `concurrency: 2
agents:
  - id: fails
    overlay: true
    run: exit 3
  - id: waits
    overlay: true
    run: touch ${started}; sleep 600
`
    )
    const cli = startCli(["run", plan, "--json"], { cwd: repo })
    await waitFor(
      () => NodeFs.existsSync(started) && /"type":"Finished"[^\n]*"agentId":"fails"/.test(cli.output()),
      30_000,
      "the failing agent to finish and the other to start"
    )
    cli.signal("SIGINT")
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(130)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "overlay"))).toBe(false)
    expect(branches(repo).filter((b) => b.includes("/fails") || b.includes("/waits"))).toEqual([])
  }, 120_000)

  it("kill -9 mid-run: gc removes the overlay workspace, its snapshot and its branch", async () => {
    const repo = makeRepo(files)
    const signals = tempDir("signals-")
    const pidFile = NodePath.join(signals, "pid")
    const go = NodePath.join(signals, "go")
    // the agent blocks reading this pipe until the test writes to it: no polling on either side
    execFileSync("mkfifo", [go])
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: slow
    overlay: true
    run: echo $$ > ${pidFile}; read line < ${go}
`
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidIn(pidFile) !== undefined, 30_000, "the agent to start")
    const agent = pidIn(pidFile)!
    cli.signal("SIGKILL")
    await cli.done
    NodeFs.writeFileSync(go, "")
    await waitFor(() => !isAlive(agent), 30_000, "the agent to end")
    expect(NodeFs.readdirSync(NodePath.join(repo, ".corral", "overlay"))).toHaveLength(1)
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    expect(gc.stdout).toMatch(/, 0 kept/)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "overlay"))).toBe(false)
    expect(branches(repo).filter((b) => b.includes("/slow"))).toEqual([])
  }, 120_000)
})

describe("overlay workspaces: plan checks (end to end)", () => {
  const expectRejected = async (plan: string, env: Record<string, string>, message: RegExp) => {
    const repo = makeRepo(files)
    const file = writePlan(tempDir("plan-"), "plan.yaml", plan)
    for (const command of ["validate", "run"]) {
      const result = await runCli([command, file], { cwd: repo, env })
      expect(result.code, result.stdout + result.stderr).toBe(2)
      expect(result.stderr).toMatch(message)
    }
    expect(branches(repo)).toEqual(["main"])
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "worktrees"))).toBe(false)
  }

  it("a machine that cannot mount an overlay: exit 2, nothing started", async () => {
    await expectRejected(
      "agents:\n  - id: a\n    overlay: true\n    run: echo a > a.txt\n",
      { CORRAL_UNSHARE: "/nonexistent/unshare" },
      /agents a ask for an overlay workspace, but CORRAL_UNSHARE=\/nonexistent\/unshare is not an executable/
    )
  })

  it("overlay with a sandbox (also from defaults) or with sparse: exit 2", async () => {
    await expectRejected(
      "defaults: { sandbox: true }\nagents:\n  - id: a\n    overlay: true\n    run: echo a > a.txt\n",
      {},
      /agents a ask for an overlay workspace and a sandbox/
    )
    await expectRejected(
      "agents:\n  - id: a\n    overlay: true\n    sparse: true\n    run: echo a > a.txt\n",
      {},
      /`sparse` does not apply to an overlay workspace/
    )
  })
})

/** Mounts of any process whose mount point or options name `dir` (an overlay lives in its agent's namespace). */
const mountsNaming = (dir: string): Array<string> =>
  NodeFs.readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        return NodeFs.readFileSync(`/proc/${pid}/mountinfo`, "utf8").split("\n")
      } catch {
        return []
      }
    })
    .filter((line) => line.includes(dir))

const runIdOf = (repo: string, agentId: string, except: ReadonlyArray<string> = []): string =>
  branches(repo)
    .filter((b) => b.endsWith(`/${agentId}`))
    .map((b) => b.split("/")[1]!)
    .find((id) => !except.includes(id))!

describe.skipIf(!enabled)("corral discard of overlay runs (end to end)", () => {
  const blocking = (pidFile: string, go: string) => `agents:
  - id: slow
    overlay: true
    run: echo wip > wip.txt; echo $$ > ${pidFile}; read line < ${go}
`

  /** Starts a run whose overlay agent writes a file and waits on the fifo `go`; returns once it runs. */
  const startBlockedRun = async (repo: string) => {
    const signals = tempDir("signals-")
    const pidFile = NodePath.join(signals, "pid")
    const go = NodePath.join(signals, "go")
    execFileSync("mkfifo", [go])
    const cli = startCli(["run", writePlan(tempDir("plan-"), "plan.yaml", blocking(pidFile, go))], { cwd: repo })
    await waitFor(() => pidIn(pidFile) !== undefined, 30_000, "the agent to start")
    return { cli, go, agent: pidIn(pidFile)! }
  }

  it("removes a kept overlay workspace's overlay folder with its worktree and branches, and nothing else", async () => {
    const repo = makeRepo(files)
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: broken\n    overlay: true\n    run: echo partial > part.txt; echo more >> src/a/one.txt; exit 1\n"
    )
    expect((await runCli(["run", plan, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const first = runIdOf(repo, "broken")
    expect((await runCli(["run", plan, "--keep-workspaces"], { cwd: repo })).code).toBe(1)
    const second = runIdOf(repo, "broken", [first])
    git(repo, "branch", "corral/notes")
    NodeFs.writeFileSync(NodePath.join(repo, "notes.txt"), "mine\n")
    const overlay = (runId: string) => NodePath.join(repo, ".corral", "overlay", runId)
    expect(NodeFs.readFileSync(NodePath.join(overlay(first), "agents", "broken", "upper", "part.txt"), "utf8")).toBe(
      "partial\n"
    )
    const result = await runCli(["discard", first, "--yes"], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain(`removed ${overlay(first)}`)
    expect(NodeFs.existsSync(overlay(first))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "agents", first))).toBe(false)
    expect(branches(repo).filter((b) => b.startsWith(`corral/${first}/`))).toEqual([])
    expect(worktrees(repo)).toEqual([
      NodeFs.realpathSync(repo),
      NodePath.join(NodeFs.realpathSync(repo), ".corral", "worktrees", second, "broken")
    ])
    expect(NodeFs.readFileSync(NodePath.join(overlay(second), "agents", "broken", "upper", "part.txt"), "utf8")).toBe(
      "partial\n"
    )
    expect(branches(repo).sort()).toEqual(["corral/notes", `corral/${second}/broken`, "main"].sort())
    expect(git(repo, "status", "--porcelain")).toBe("?? notes.txt\n")
    expect((await runCli(["discard", second, "--yes"], { cwd: repo })).code).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "overlay"))).toBe(false)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(mountsNaming(NodePath.join(repo, ".corral"))).toEqual([])
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.stdout).toMatch(/^0 removed, 0 kept$/m)
  }, 120_000)

  it("after kill -9 stops the run's orphaned overlay agent and removes its folder: no mount left", async () => {
    const repo = makeRepo(files)
    const { cli, agent } = await startBlockedRun(repo)
    const runId = runIdOf(repo, "slow")
    const runDir = NodePath.join(repo, ".corral", "overlay", runId)
    cli.signal("SIGKILL")
    await cli.done
    try {
      expect(isAlive(agent)).toBe(true)
      expect(mountsNaming(runDir).length).toBeGreaterThan(0)
      const result = await runCli(["discard", runId, "--yes"], { cwd: repo })
      expect(result.code, result.stdout + result.stderr).toBe(0)
      expect(isAlive(agent)).toBe(false)
      expect(mountsNaming(runDir)).toEqual([])
      expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "overlay"))).toBe(false)
      expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
      expect(branches(repo)).toEqual(["main"])
    } finally {
      if (isAlive(agent)) process.kill(agent, "SIGKILL")
    }
  }, 120_000)

  it("a live overlay run is still refused", async () => {
    const repo = makeRepo(files)
    const { cli, go } = await startBlockedRun(repo)
    const runId = runIdOf(repo, "slow")
    const runDir = NodePath.join(repo, ".corral", "overlay", runId)
    const result = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(2)
    expect(result.stderr).toContain(`run ${runId} is still running (pid `)
    expect(result.stderr).toContain("nothing removed; stop it first")
    expect(result.stdout).toBe("")
    expect(NodeFs.existsSync(NodePath.join(runDir, "agents", "slow", "upper", "wip.txt"))).toBe(true)
    expect(mountsNaming(runDir).length).toBeGreaterThan(0)
    NodeFs.writeFileSync(go, "\n")
    const run = await cli.done
    expect(run.code, run.stdout + run.stderr).toBe(0)
    expect(NodeFs.existsSync(runDir)).toBe(false)
  }, 120_000)
})
