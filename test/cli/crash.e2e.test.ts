import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { DatabaseSync } from "node:sqlite"
import { describe, expect, it } from "vitest"
import { branches, git, isAlive, makeRepo, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"
import { events, processesOf, sweepPlan } from "./support/sweep.ts"
import { mulberry32 } from "../support/random.ts"

/**
 * kill -9 of `corral run` at seeded random instants (after the n-th JSON event), and once between
 * "merged onto the integration branch" and "recorded in the ledger" (the `CORRAL_TEST_KILL_AT`
 * hook), then `corral run --resume`: every agent's work is applied exactly once.
 * `CORRAL_KILL_POINTS` sets how many random kill points run (default 3), `CORRAL_KILL_SEED` the seed.
 */
const AGENTS = 12
const points = Number(process.env.CORRAL_KILL_POINTS ?? 3)
const seed = Number(process.env.CORRAL_KILL_SEED ?? 20261126)

const planText = () => sweepPlan({ prefix: "k", count: AGENTS, concurrency: 4, step: 7, modulo: 5 })

const integrationBranches = (repo: string) => branches(repo).filter((b) => b.endsWith("/integration"))

const checkAfterResume = async (repo: string, killedRunId: string) => {
  const state = NodePath.join(repo, ".corral")
  const resumedBranch = integrationBranches(repo).find((b) => !b.includes(killedRunId))
  expect(resumedBranch, "the resumed run's integration branch").toBeDefined()
  for (let i = 1; i <= AGENTS; i++) {
    const text = git(repo, "show", `${resumedBranch}:out/k${i}.txt`)
    expect(text, `out/k${i}.txt on ${resumedBranch}`).toBe(`k${i}\n`)
  }
  const shared = git(repo, "show", `${resumedBranch}:shared/log.txt`).split("\n").filter(Boolean).sort()
  expect(shared).toEqual(["k1", "k10", "k4", "k7"])
  expect(processesOf(killedRunId), "processes of the killed run").toEqual([])
  const locks = new DatabaseSync(NodePath.join(state, "locks.db"))
  try {
    expect(locks.prepare("SELECT run_id, agent_id FROM leases").all(), "leases left behind").toEqual([])
  } finally {
    locks.close()
  }
  const ledger = new DatabaseSync(NodePath.join(state, "ledger.db"))
  try {
    expect(ledger.prepare("PRAGMA integrity_check").get()).toEqual({ integrity_check: "ok" })
  } finally {
    ledger.close()
  }
  const runs = await runCli(["runs"], { cwd: repo })
  expect(runs.code, runs.stdout + runs.stderr).toBe(0)
  expect(runs.stdout).toMatch(/succeeded/)
}

/** The kill landed after the run recorded its end: there is nothing to resume (the run finished). */
const recordedEnd = (repo: string, runId: string): boolean => {
  const ledger = new DatabaseSync(NodePath.join(repo, ".corral", "ledger.db"))
  try {
    const row = ledger.prepare("SELECT ended_at FROM runs WHERE run_id = ?").get(runId) as
      | { ended_at: number | null }
      | undefined
    return row?.ended_at !== undefined && row.ended_at !== null
  } finally {
    ledger.close()
  }
}

const killAndResume = async (env: Record<string, string>, killAfterEvents: number | undefined) => {
  const repo = makeRepo()
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planText())
  const first = startCli(["run", plan, "--json"], { cwd: repo, env })
  if (killAfterEvents !== undefined) {
    await waitFor(
      () => events(first.output()).length >= killAfterEvents || !isAlive(first.pid),
      60_000,
      `event ${killAfterEvents}`
    )
    first.signal("SIGKILL")
  }
  const ended = await first.done
  const seen = events(ended.stdout)
  const killedRunId = seen.find((event) => event.runId !== undefined)?.runId
  expect(killedRunId, ended.stderr).toBeDefined()
  if (ended.code === 0 || recordedEnd(repo, killedRunId!)) return { repo, killed: false, seen }
  expect(ended.signal).toBe("SIGKILL")
  const resumed = await runCli(["run", plan, "--resume"], { cwd: repo })
  expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
  await checkAfterResume(repo, killedRunId!)
  return { repo, killed: true, seen, resumed }
}

describe("kill -9 and resume (end to end)", () => {
  it("a kill between merged and recorded: resume does not apply the agent's work again", async () => {
    const { killed, seen, resumed } = await killAndResume({ CORRAL_TEST_KILL_AT: "merged:k5" }, undefined)
    expect(killed).toBe(true)
    expect(seen.some((event) => event.type === "Merged" && event.agentId === "k5")).toBe(false)
    expect(resumed!.stdout).toMatch(/k5: merged by run \S+ \([0-9a-f]{10}\) before it stopped; not run again/)
  }, 120_000)

  it(`kills at ${points} seeded random instants (seed ${seed}): every agent's work is applied exactly once`, async () => {
    const random = mulberry32(seed)
    let killed = 0
    for (let point = 0; point < points; point++) {
      const at = 1 + Math.floor(random() * 70)
      const outcome = await killAndResume({}, at)
      if (outcome.killed) killed++
    }
    expect(killed, "kill points that landed before the run finished").toBeGreaterThan(0)
  }, 600_000)
})

describe("leases of a killed run (end to end)", () => {
  it("resume does not wait for the leases of the killed run; fencing tokens keep increasing", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
agents:
  - id: holder
    run: echo $CORRAL_FENCING_TOKEN >> ${side}/tokens && { test -e ${side}/go || sleep 300; } && echo done > a.txt
    claims: { write: [a.txt] }
`
    )
    const first = startCli(["run", plan, "--json"], { cwd: repo })
    await waitFor(() => NodeFs.existsSync(NodePath.join(side, "tokens")), 30_000, "the agent to start")
    const killedRunId = events(first.output()).find((event) => event.runId !== undefined)?.runId
    first.signal("SIGKILL")
    await first.done
    const leases = new DatabaseSync(NodePath.join(repo, ".corral", "locks.db"))
    try {
      expect(leases.prepare("SELECT run_id FROM leases").all(), "the killed run's lease is left").toEqual([
        { run_id: killedRunId }
      ])
    } finally {
      leases.close()
    }
    NodeFs.writeFileSync(NodePath.join(side, "go"), "")
    const resumed = await runCli(["run", plan, "--resume", "--json"], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    const waits = events(resumed.stdout).filter((event) => event.type === "WaitingForClaims")
    expect(JSON.stringify(waits)).not.toContain(killedRunId)
    const tokens = NodeFs.readFileSync(NodePath.join(side, "tokens"), "utf8").trim().split("\n").map(Number)
    expect(tokens).toHaveLength(2)
    expect(tokens[1]!).toBeGreaterThan(tokens[0]!)
  }, 120_000)
})

describe("processes of a killed run that left their group (end to end)", () => {
  it("the next corral command stops a setsid descendant of the killed run's agent", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nagents:\n  - id: daemon\n    run: setsid sh -c 'echo $$ > ${side}/pid; exec sleep 300' & sleep 300\n`
    )
    const first = startCli(["run", plan], { cwd: repo })
    const pidFile = NodePath.join(side, "pid")
    await waitFor(
      () => NodeFs.existsSync(pidFile) && NodeFs.readFileSync(pidFile, "utf8").trim() !== "",
      30_000,
      "the descendant to write its pid"
    )
    const tracked = () => {
      const runs = NodePath.join(repo, ".corral", "runs")
      return (
        NodeFs.existsSync(runs) &&
        NodeFs.readdirSync(runs).some((run) => NodeFs.existsSync(NodePath.join(runs, run, "pids", "daemon")))
      )
    }
    await waitFor(tracked, 30_000, "corral to record the agent's process group")
    const pid = Number(NodeFs.readFileSync(NodePath.join(side, "pid"), "utf8"))
    first.signal("SIGKILL")
    await first.done
    expect(isAlive(pid), "the descendant outlives its killed orchestrator").toBe(true)
    const quick = writePlan(tempDir("plan-"), "quick.yaml", "version: 1\nagents:\n  - id: quick\n    run: echo hi\n")
    const next = await runCli(["run", quick], { cwd: repo })
    expect(next.code, next.stdout + next.stderr).toBe(0)
    await waitFor(() => !isAlive(pid), 10_000, "the escaped descendant to be stopped")
  }, 120_000)
})
