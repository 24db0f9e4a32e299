import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { DatabaseSync } from "node:sqlite"
import { describe, expect, it } from "vitest"
import { git, isAlive, makeRepo, runCli, startCli, tempDir, waitFor, worktrees, writePlan } from "../helpers.ts"
import { events, expectEarlyStopExit, processesOf, sweepPlan } from "./support/sweep.ts"
import { mulberry32 } from "../support/random.ts"

/**
 * Ctrl-C (SIGINT) and SIGTERM to `corral run` at seeded random instants — after the n-th JSON event
 * plus a few milliseconds, so the signal lands in worktree set-up, agents running or committing,
 * merges into the integration branch, the pool closing or the run's end — then, once it exited: its
 * exit code (130, or 0 if the run had finished), the summary, no process of the run, no worktree but
 * those the run said it kept (an agent stopped with uncommitted changes keeps its own), no `.lock` file, `git fsck` clean, the user's checkout untouched, the run not `running` in the
 * ledger, no lease held; and `corral run --resume` applies every agent's work exactly once.
 * A second sweep signals at random instants of the first 600 ms, before or while the run is prepared
 * (one per four points); a third stops a run early, then signals its `--resume` at a random instant
 * and checks the same of it, and a last resume applies every agent's work exactly once (one per four
 * points). `CORRAL_STOP_POINTS` sets how many instants run (default 8), `CORRAL_STOP_SEED` the seed.
 */
const AGENTS = 8
const points = Number(process.env.CORRAL_STOP_POINTS ?? 8)
const seed = Number(process.env.CORRAL_STOP_SEED ?? 20261127)
const early = Math.ceil(points / 4)
const resumes = Math.ceil(points / 4)

const planText = () => sweepPlan({ prefix: "s", count: AGENTS, concurrency: 3, step: 3, modulo: 4 })

/** The worktrees the run reported kept (an agent stopped with uncommitted changes keeps its own). */
const keptIn = (output: string) =>
  events(output).flatMap((event) => (event.type === "WorkspaceKept" ? [event.path!] : []))

const lockFiles = (dir: string): Array<string> =>
  NodeFs.readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".lock"))

const leases = (repo: string) => {
  if (!NodeFs.existsSync(NodePath.join(repo, ".corral", "locks.db"))) return []
  const db = new DatabaseSync(NodePath.join(repo, ".corral", "locks.db"))
  try {
    return db.prepare("SELECT run_id, agent_id FROM leases").all()
  } finally {
    db.close()
  }
}

const fsck = (repo: string) =>
  execFileSync("git", ["fsck", "--no-dangling", "--no-progress"], { cwd: repo, encoding: "utf8", stdio: "pipe" })

/** No `.lock` file under the repository's `.git`: right after corral exited, no git command it started still runs. */
const expectNoLocks = (repo: string, context: string) =>
  expect(lockFiles(NodePath.join(repo, ".git")), `.lock files (${context})`).toEqual([])

/** What must hold once `corral run` exited, stopped or not. */
const checkLeftovers = async (
  repo: string,
  runId: string,
  head: string,
  kept: ReadonlyArray<string>,
  context: string
) => {
  expect(processesOf(runId), `processes of the run (${context})`).toEqual([])
  expect(worktrees(repo).sort(), `worktrees (${context})`).toEqual([NodeFs.realpathSync(repo), ...kept].sort())
  expectNoLocks(repo, context)
  expect(() => fsck(repo), `git fsck (${context})`).not.toThrow()
  expect(git(repo, "status", "--porcelain"), `the checkout (${context})`).toBe("")
  expect(git(repo, "symbolic-ref", "--short", "HEAD").trim(), `the branch (${context})`).toBe("main")
  expect(git(repo, "rev-parse", "HEAD").trim(), `HEAD (${context})`).toBe(head)
  expect(leases(repo), `leases (${context})`).toEqual([])
  const runs = await runCli(["runs"], { cwd: repo })
  expect(runs.code, runs.stdout + runs.stderr).toBe(0)
  expect(runs.stdout, `corral runs (${context})`).not.toMatch(/\brunning\b/)
  const status = await runCli(["status", runId], { cwd: repo })
  expect(status.stdout, `corral status (${context})`).not.toMatch(/\brunning\b|held by/)
}

/** Every agent's work is on `branch` exactly once. */
const checkApplied = (repo: string, branch: string) => {
  for (let i = 1; i <= AGENTS; i++) {
    expect(git(repo, "show", `${branch}:out/s${i}.txt`), `out/s${i}.txt on ${branch}`).toBe(`s${i}\n`)
  }
  const shared = git(repo, "show", `${branch}:shared/log.txt`).split("\n").filter(Boolean).sort()
  expect(shared).toEqual(["s1", "s4", "s7"])
}

/**
 * Starts `corral run <args> --json`, sends `signal` after its `afterEvents`-th JSON event plus
 * `extraMs` (or after it exited), and checks its exit: 130, or 0 when it had finished, and a summary.
 */
const stopAt = async (
  repo: string,
  args: ReadonlyArray<string>,
  signal: "SIGINT" | "SIGTERM",
  afterEvents: number,
  extraMs: number,
  context: string
) => {
  const cli = startCli(["run", ...args, "--json"], { cwd: repo })
  await waitFor(() => events(cli.output()).length >= afterEvents || !isAlive(cli.pid), 60_000, "the event")
  if (extraMs > 0) await new Promise((resolve) => setTimeout(resolve, extraMs))
  cli.signal(signal)
  const ended = await cli.done
  const runId = events(ended.stdout).find((event) => event.runId !== undefined)?.runId
  expect(runId, ended.stderr).toBeDefined()
  expect(
    [0, 130],
    `exit code ${ended.code}, signal ${ended.signal} (${context}): ${ended.stderr}${ended.stdout}`
  ).toContain(ended.code)
  expect(ended.stderr, `the summary (${context})`).toContain(`run ${runId}: `)
  return { code: ended.code, runId: runId!, kept: keptIn(ended.stdout) }
}

/** `corral run --resume` to the end: exit 0, nothing left, every agent's work applied once. */
const resumeToTheEnd = async (
  repo: string,
  plan: string,
  head: string,
  kept: ReadonlyArray<string>,
  context: string
) => {
  const resumed = await runCli(["run", plan, "--resume", "--json"], { cwd: repo })
  expect(resumed.code, `resume (${context}): ${resumed.stdout}${resumed.stderr}`).toBe(0)
  const resumedId = events(resumed.stdout).find((event) => event.runId !== undefined)?.runId
  await checkLeftovers(repo, resumedId!, head, kept, `${context}, resumed`)
  checkApplied(repo, `corral/${resumedId}/integration`)
}

const stopAndResume = async (signal: "SIGINT" | "SIGTERM", afterEvents: number, extraMs: number) => {
  const repo = makeRepo()
  const head = git(repo, "rev-parse", "HEAD").trim()
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planText())
  const context = `${signal} after event ${afterEvents} + ${extraMs} ms`
  const first = await stopAt(repo, [plan], signal, afterEvents, extraMs, context)
  await checkLeftovers(repo, first.runId, head, first.kept, context)
  if (first.code === 0) {
    checkApplied(repo, `corral/${first.runId}/integration`)
    return false
  }
  await resumeToTheEnd(repo, plan, head, first.kept, context)
  return true
}

/**
 * A run stopped by Ctrl-C after its `firstEvents`-th event, then its resume stopped by `signal` after
 * its `afterEvents`-th event plus `extraMs`; a last resume finishes the work. True when the signal
 * stopped the resume (false when the resume had finished, or the first run had).
 */
const stopTheResume = async (
  signal: "SIGINT" | "SIGTERM",
  firstEvents: number,
  afterEvents: number,
  extraMs: number
) => {
  const repo = makeRepo()
  const head = git(repo, "rev-parse", "HEAD").trim()
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planText())
  const firstContext = `SIGINT after event ${firstEvents}`
  const first = await stopAt(repo, [plan], "SIGINT", firstEvents, 0, firstContext)
  await checkLeftovers(repo, first.runId, head, first.kept, firstContext)
  if (first.code === 0) return false
  const context = `${firstContext}, then the resume: ${signal} after event ${afterEvents} + ${extraMs} ms`
  const resume = await stopAt(repo, [plan, "--resume"], signal, afterEvents, extraMs, context)
  const kept = [...new Set([...first.kept, ...resume.kept])]
  await checkLeftovers(repo, resume.runId, head, kept, context)
  if (resume.code === 0) {
    checkApplied(repo, `corral/${resume.runId}/integration`)
    return false
  }
  await resumeToTheEnd(repo, plan, head, kept, context)
  return true
}

/** A signal `delayMs` after the start, maybe before the run's first event: then a fresh run does the work. */
const stopEarly = async (signal: "SIGINT" | "SIGTERM", delayMs: number) => {
  const repo = makeRepo()
  const head = git(repo, "rev-parse", "HEAD").trim()
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planText())
  const first = startCli(["run", plan, "--json"], { cwd: repo })
  await new Promise((resolve) => setTimeout(resolve, delayMs))
  first.signal(signal)
  const ended = await first.done
  const context = `${signal} ${delayMs} ms after the start`
  const runId = events(ended.stdout).find((event) => event.runId !== undefined)?.runId
  expectEarlyStopExit(ended, signal, runId, context)
  if (runId !== undefined) {
    expect(ended.stderr, `the summary (${context})`).toContain(`run ${runId}: `)
    await checkLeftovers(repo, runId, head, keptIn(ended.stdout), context)
  } else {
    expect(worktrees(repo), `worktrees (${context})`).toEqual([NodeFs.realpathSync(repo)])
    expectNoLocks(repo, context)
    expect(git(repo, "status", "--porcelain"), `the checkout (${context})`).toBe("")
    expect(leases(repo), `leases (${context})`).toEqual([])
  }
  if (ended.code === 0) return checkApplied(repo, `corral/${runId}/integration`)
  const resumed = await runCli(["run", plan, "--resume", "--json"], { cwd: repo })
  const next =
    resumed.code === 2 && resumed.stderr.includes("no unfinished run")
      ? await runCli(["run", plan, "--json"], { cwd: repo })
      : resumed
  expect(next.code, `the next run (${context}): ${next.stdout}${next.stderr}`).toBe(0)
  const nextId = events(next.stdout).find((event) => event.runId !== undefined)?.runId
  await checkLeftovers(repo, nextId!, head, keptIn(ended.stdout), `${context}, next run`)
  checkApplied(repo, `corral/${nextId}/integration`)
}

describe("Ctrl-C and SIGTERM at random instants (end to end)", () => {
  it(`stops at ${early} seeded random instants of its first 600 ms (seed ${seed}): clean exit, the next run does the work`, async () => {
    const random = mulberry32(seed + 1)
    for (let point = 0; point < early; point++) {
      await stopEarly(random() < 0.5 ? "SIGINT" : "SIGTERM", Math.floor(random() * 600))
    }
  }, 600_000)

  it(`stops at ${points} seeded random instants (seed ${seed}): clean exit, and resume applies every agent's work once`, async () => {
    const random = mulberry32(seed)
    let stopped = 0
    for (let point = 0; point < points; point++) {
      const signal = random() < 0.5 ? "SIGINT" : "SIGTERM"
      const afterEvents = 1 + Math.floor(random() * 50)
      const extraMs = Math.floor(random() * 40)
      if (await stopAndResume(signal, afterEvents, extraMs)) stopped++
    }
    expect(stopped, "instants that landed before the run finished").toBeGreaterThan(0)
  }, 600_000)

  it(`stops corral run --resume at ${resumes} seeded random instants (seed ${seed}): clean exit, and the next resume applies every agent's work once`, async () => {
    const random = mulberry32(seed + 2)
    let stopped = 0
    for (let point = 0; point < resumes; point++) {
      const signal = random() < 0.5 ? "SIGINT" : "SIGTERM"
      const firstEvents = 1 + Math.floor(random() * 12)
      const afterEvents = 1 + Math.floor(random() * 45)
      const extraMs = Math.floor(random() * 40)
      if (await stopTheResume(signal, firstEvents, afterEvents, extraMs)) stopped++
    }
    expect(stopped, "instants that landed before the resume finished").toBeGreaterThan(0)
  }, 600_000)
})
