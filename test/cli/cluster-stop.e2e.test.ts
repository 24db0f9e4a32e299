import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { PostgresClient } from "@corral/postgres"
import { Effect, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { describe, expect, it } from "vitest"
import { branches, git, isAlive, runCli, startCli, waitFor, worktrees, writePlan } from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"
import { events, expectEarlyStopExit, processesOf, stopExitCode, sweepPlan } from "./support/sweep.ts"
import { mulberry32 } from "../support/random.ts"

/**
 * Ctrl-C (SIGINT), SIGTERM and SIGHUP to the coordinator of `corral run --cluster` at seeded random
 * instants (after the n-th JSON event plus 0–40 ms), on a real PostgreSQL server and two `corral
 * runner`s in clones of the repository. Right at the coordinator's exit (it waits for its runners
 * to end the run's executions, so the test does not): its exit code (130, 129 after SIGHUP, or the
 * run's own if it had ended), the summary, the run `interrupted` (or its real end) in the cluster's
 * ledger, no claim and no execution lease in PostgreSQL, no agent process of the run on any runner,
 * both runners alive with no worktree or branch of the run, the user's checkout untouched; then
 * `--resume` applies every agent's work exactly once and leaves the same state. The points share one
 * database and the two runners (each point its own repository state: plan, agent ids), so a runner
 * must stay usable after every stop. Then one point per four signals 0–1500 ms after the start
 * (before or while the run is recorded and prepared): the next run does all the work; and one per
 * four stops a run by Ctrl-C after its 1st–12th event, signals its `--resume` after event 1–45 plus
 * 0–39 ms, checks the resume as a run, and a last `--resume` applies every agent's work once.
 * `CORRAL_STOP_POINTS` sets how many instants run (default 4), `CORRAL_STOP_SEED` the seed.
 */
const cluster = await clusterTests()
const AGENTS = 6
const points = Number(process.env.CORRAL_STOP_POINTS ?? 4)
const seed = Number(process.env.CORRAL_STOP_SEED ?? 20261127)
const early = Math.ceil(points / 4)
const resumes = Math.ceil(points / 4)
const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const
type StopSignal = (typeof signals)[number]
const pick = (random: () => number): StopSignal => signals[Math.floor(random() * signals.length)]!

const rows = (url: string, query: string): Promise<ReadonlyArray<unknown>> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return yield* sql.unsafe(query)
    }).pipe(Effect.provide(PostgresClient.layer(url)))
  )

/** What must hold once the coordinator exited, stopped or not. */
const checkLeftovers = async (
  setup: { readonly url: string; readonly repo: string; readonly head: string; readonly clones: ReadonlyArray<string> },
  runners: ReadonlyArray<{ readonly pid: number }>,
  runId: string,
  context: string
) => {
  const { url, repo, head, clones } = setup
  const executions = () => rows(url, "SELECT entity FROM corral_executions")
  const runnerWorktrees = () =>
    clones.flatMap((clone) => worktrees(clone).filter((dir) => NodeFs.realpathSync(dir) !== NodeFs.realpathSync(clone)))
  expect(processesOf(runId), `agent processes of the run (${context})`).toEqual([])
  expect(await executions(), `execution leases (${context})`).toEqual([])
  expect(runnerWorktrees(), `worktrees of the runners' clones (${context})`).toEqual([])
  expect(await rows(url, "SELECT run_id, agent_id FROM corral_leases"), `claims (${context})`).toEqual([])
  for (const runner of runners) expect(isAlive(runner.pid), `runner ${runner.pid} alive (${context})`).toBe(true)
  for (const clone of clones) {
    expect(
      branches(clone).filter((branch) => branch.startsWith(`corral/${runId}/`)),
      `branches of runner clone ${clone} (${context})`
    ).toEqual([])
  }
  expect(worktrees(repo), `worktrees (${context})`).toEqual([NodeFs.realpathSync(repo)])
  expect(git(repo, "status", "--porcelain"), `the checkout (${context})`).toBe("")
  expect(git(repo, "symbolic-ref", "--short", "HEAD").trim(), `the branch (${context})`).toBe("main")
  expect(git(repo, "rev-parse", "HEAD").trim(), `HEAD (${context})`).toBe(head)
  const runs = await runCli(["runs", "--cluster", url], { cwd: repo })
  expect(runs.code, runs.stdout + runs.stderr).toBe(0)
  expect(runs.stdout, `corral runs (${context})`).toMatch(new RegExp(`${runId}\\s+(interrupted|succeeded)`))
}

/** Every agent of `prefix` has its work on `branch` exactly once. */
const checkApplied = (repo: string, prefix: string, branch: string) => {
  for (let i = 1; i <= AGENTS; i++) {
    const id = `${prefix}${i}`
    expect(git(repo, "show", `${branch}:out/${id}.txt`), `out/${id}.txt on ${branch}`).toBe(`${id}\n`)
  }
  const shared = git(repo, "show", `${branch}:shared/log.txt`).split("\n").filter(Boolean).sort()
  expect(shared, `shared/log.txt on ${branch}`).toEqual([`${prefix}1`, `${prefix}4`])
}

const runIdOf = (stdout: string) => events(stdout).find((event) => event.runId !== undefined)?.runId

/**
 * A signal `delayMs` after the coordinator started, maybe before it recorded the run (connecting to
 * PostgreSQL, preparing the run): then `--resume` finds nothing and a fresh run does the work.
 */
const stopEarly = async (
  setup: { readonly url: string; readonly repo: string; readonly head: string; readonly clones: ReadonlyArray<string> },
  runners: ReadonlyArray<{ readonly pid: number }>,
  prefix: string,
  signal: StopSignal,
  delayMs: number
) => {
  const { url, repo } = setup
  const context = `${signal} ${delayMs} ms after the start`
  const planText = sweepPlan({ prefix, count: AGENTS, concurrency: 3, step: 3, modulo: 4 })
  const plan = writePlan(cluster.scratch("corral-plan-"), "plan.yaml", planText)
  const first = cluster.track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
  await new Promise((resolve) => setTimeout(resolve, delayMs))
  first.signal(signal)
  const ended = await first.done
  const runId = runIdOf(ended.stdout)
  expectEarlyStopExit(ended, signal, runId, context)
  expect(ended.stderr, `the runners stopped the run's agents in time (${context})`).not.toMatch(
    /corral: still running after|corral: cannot see whether the runners/
  )
  if (runId !== undefined) {
    expect(ended.stderr, `the summary (${context})`).toContain(`run ${runId}: `)
    await checkLeftovers(setup, runners, runId, context)
  }
  if (ended.code === 0) return checkApplied(repo, prefix, `corral/${runId}/integration`)
  const resumed = await runCli(["run", plan, "--resume", "--cluster", url, "--json"], { cwd: repo })
  const next =
    resumed.code === 2 && resumed.stderr.includes("no unfinished run")
      ? await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
      : resumed
  expect(next.code, `the next run (${context}): ${next.stdout}${next.stderr}`).toBe(0)
  const nextId = runIdOf(next.stdout)!
  await checkLeftovers(setup, runners, nextId, `${context}, next run`)
  checkApplied(repo, prefix, `corral/${nextId}/integration`)
}

type Setup = {
  readonly url: string
  readonly repo: string
  readonly head: string
  readonly clones: ReadonlyArray<string>
}

/**
 * Starts `corral run <args> --cluster <url> --json`, sends `signal` after its `afterEvents`-th JSON
 * event plus `extraMs` (or after it exited), and checks its exit: 130 (129 after SIGHUP), or 0 when
 * the run had finished, and its summary.
 */
const stopAt = async (
  url: string,
  repo: string,
  args: ReadonlyArray<string>,
  signal: StopSignal,
  afterEvents: number,
  extraMs: number,
  context: string
) => {
  const cli = cluster.track(startCli(["run", ...args, "--cluster", url, "--json"], { cwd: repo }))
  await waitFor(() => events(cli.output()).length >= afterEvents || !isAlive(cli.pid), 120_000, "the event")
  if (extraMs > 0) await new Promise((resolve) => setTimeout(resolve, extraMs))
  cli.signal(signal)
  const ended = await cli.done
  const runId = runIdOf(ended.stdout)
  expect(runId, `${context}: ${ended.stderr}`).toBeDefined()
  const finished = events(ended.stdout).some((event) => event.type === "RunFinished")
  expect(
    finished ? [0, stopExitCode(signal)] : [stopExitCode(signal)],
    `exit code ${ended.code}, signal ${ended.signal} (${context}): ${ended.stderr}${ended.stdout}`
  ).toContain(ended.code)
  expect(ended.stderr, `the summary (${context})`).toContain(`run ${runId}: `)
  expect(ended.stderr, `the runners stopped the run's agents in time (${context})`).not.toMatch(
    /corral: still running after|corral: cannot see whether the runners/
  )
  return { code: ended.code, runId: runId! }
}

/** `corral run --resume` to the end: exit 0, nothing left, every agent's work applied once. */
const resumeToTheEnd = async (
  setup: Setup,
  runners: ReadonlyArray<{ readonly pid: number }>,
  plan: string,
  prefix: string,
  context: string
) => {
  const resumed = await runCli(["run", plan, "--resume", "--cluster", setup.url, "--json"], { cwd: setup.repo })
  expect(resumed.code, `resume (${context}): ${resumed.stdout}${resumed.stderr}`).toBe(0)
  const resumedId = runIdOf(resumed.stdout)!
  await checkLeftovers(setup, runners, resumedId, `${context}, resumed`)
  checkApplied(setup.repo, prefix, `corral/${resumedId}/integration`)
}

/**
 * A run stopped by Ctrl-C after its `firstEvents`-th event, then its `--resume` stopped by `signal`
 * after its `afterEvents`-th event plus `extraMs`, checked as a run; a last `--resume` applies every
 * agent's work exactly once. True when the signal stopped the resume.
 */
const stopTheResume = async (
  setup: Setup,
  runners: ReadonlyArray<{ readonly pid: number }>,
  prefix: string,
  at: {
    readonly firstEvents: number
    readonly signal: StopSignal
    readonly afterEvents: number
    readonly extraMs: number
  }
) => {
  const { url, repo } = setup
  const plan = writePlan(
    cluster.scratch("corral-plan-"),
    "plan.yaml",
    sweepPlan({ prefix, count: AGENTS, concurrency: 3, step: 3, modulo: 4 })
  )
  const firstContext = `${prefix}: SIGINT after event ${at.firstEvents}`
  const first = await stopAt(url, repo, [plan], "SIGINT", at.firstEvents, 0, firstContext)
  await checkLeftovers(setup, runners, first.runId, firstContext)
  if (first.code === 0) {
    checkApplied(repo, prefix, `corral/${first.runId}/integration`)
    return false
  }
  const context = `${firstContext}, then the resume: ${at.signal} after event ${at.afterEvents} + ${at.extraMs} ms`
  const resume = await stopAt(url, repo, [plan, "--resume"], at.signal, at.afterEvents, at.extraMs, context)
  await checkLeftovers(setup, runners, resume.runId, context)
  if (resume.code === 0) {
    checkApplied(repo, prefix, `corral/${resume.runId}/integration`)
    return false
  }
  await resumeToTheEnd(setup, runners, plan, prefix, context)
  return true
}

describe.skipIf(!cluster.available)("Ctrl-C, SIGTERM and SIGHUP to a cluster run's coordinator (end to end)", () => {
  it(`stops at ${points} seeded random instants and ${early} of its first 1.5 s (seed ${seed}): clean exit, clean runners and database, resume applies every agent's work once`, async () => {
    const url = await cluster.database()
    const repo = cluster.scratchRepo()
    const head = git(repo, "rev-parse", "HEAD").trim()
    const clones = [cluster.runnerClone(repo, "a"), cluster.runnerClone(repo, "b")]
    const runners = await Promise.all(clones.map((clone) => cluster.startRunner(url, clone)))
    const setup = { url, repo, head, clones }
    const random = mulberry32(seed)
    let stopped = 0
    for (let point = 0; point < points; point++) {
      const signal = pick(random)
      const afterEvents = 1 + Math.floor(random() * 40)
      const extraMs = Math.floor(random() * 40)
      const context = `point ${point}: ${signal} after event ${afterEvents} + ${extraMs} ms`
      const prefix = `p${point}c`
      const planText = sweepPlan({ prefix, count: AGENTS, concurrency: 3, step: 3, modulo: 4 })
      const plan = writePlan(cluster.scratch("corral-plan-"), "plan.yaml", planText)
      const { code, runId } = await stopAt(url, repo, [plan], signal, afterEvents, extraMs, context)
      await checkLeftovers(setup, runners, runId, context)
      if (code === 0) {
        checkApplied(repo, prefix, `corral/${runId}/integration`)
        continue
      }
      stopped++
      await resumeToTheEnd(setup, runners, plan, prefix, context)
    }
    expect(stopped, "instants that landed before the run finished").toBeGreaterThan(0)
    for (let point = 0; point < early; point++) {
      await stopEarly(setup, runners, `e${point}c`, pick(random), Math.floor(random() * 1500))
    }
    let resumesStopped = 0
    for (let point = 0; point < resumes; point++) {
      const firstEvents = 1 + Math.floor(random() * 12)
      const signal = pick(random)
      const afterEvents = 1 + Math.floor(random() * 45)
      const extraMs = Math.floor(random() * 40)
      const at = { firstEvents, signal, afterEvents, extraMs }
      if (await stopTheResume(setup, runners, `r${point}c`, at)) resumesStopped++
    }
    if (resumes >= 4)
      expect(resumesStopped, "resume instants that landed before the resume finished").toBeGreaterThan(0)
    for (const runner of runners) runner.signal("SIGINT")
    for (const runner of runners) expect((await runner.done).code).toBe(130)
  }, 600_000)
})

/**
 * Agents that take a while to stop: on SIGTERM (the runner stops its command's process group) the
 * shell sleeps `stopSeconds` before it exits (the runner's SIGKILL comes 2 s after its SIGTERM).
 * Each touches `<marks>/<id>` once its trap is set.
 */
const slowToStopPlan = (marks: string, stopSeconds: string) =>
  `version: 1\nconcurrency: 2\nagents:\n${["s1", "s2"]
    .map(
      (id) => `  - id: ${id}
    run: trap 'sleep ${stopSeconds}; exit 1' TERM; touch ${marks}/${id}; sleep 30 & wait
`
    )
    .join("")}`

describe.skipIf(!cluster.available)("a stopped cluster run waits for its runners (end to end)", () => {
  it("Ctrl-C: at the coordinator's exit no agent process, execution lease or unanswered execution of the run is left; a second Ctrl-C exits at once", async () => {
    const url = await cluster.database()
    const repo = cluster.scratchRepo()
    const runner = await cluster.startRunner(url, cluster.runnerClone(repo, "slow"))
    const db = ManagedRuntime.make(PostgresClient.layer(url))
    const query = (text: string) =>
      db.runPromise(Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql.unsafe(text)))
    try {
      const stopAfter = async (stopSeconds: string) => {
        const marks = cluster.scratch("corral-marks-")
        const plan = writePlan(cluster.scratch("corral-plan-"), "plan.yaml", slowToStopPlan(marks, stopSeconds))
        const cli = cluster.track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
        await waitFor(() => NodeFs.readdirSync(marks).length === 2 || !isAlive(cli.pid), 120_000, "both agents started")
        await query("SELECT 1")
        cli.signal("SIGINT")
        return cli
      }
      const first = await stopAfter("0.6")
      const ended = await first.done
      const runId = runIdOf(ended.stdout)!
      const left = {
        processes: processesOf(runId),
        leases: await query(`SELECT entity FROM corral_executions WHERE entity LIKE '${runId}/%'`),
        unanswered: await query(
          `SELECT entity_id FROM cluster_messages WHERE entity_id LIKE '${runId}/%' AND kind = 0 AND NOT processed`
        )
      }
      expect(ended.code, ended.stderr).toBe(130)
      expect(left, `right at the coordinator's exit: ${ended.stderr}`).toEqual({
        processes: [],
        leases: [],
        unanswered: []
      })

      const second = await stopAfter("5")
      await waitFor(() => second.output().includes("waiting for the runners to stop"), 20_000, "the waiting notice")
      // A frozen runner never ends the agents' executions, so without the second Ctrl-C the coordinator
      // would wait its whole bound (RunnerDrain.bound, 10 s) whatever the machine's load.
      process.kill(runner.pid, "SIGSTOP")
      const askedAt = Date.now()
      second.signal("SIGINT")
      const skipped = await second.done
      process.kill(runner.pid, "SIGCONT")
      expect(Date.now() - askedAt, "the second Ctrl-C exits at once, not after the bound").toBeLessThan(5000)
      expect(skipped.code, skipped.stderr).toBe(130)
      expect(skipped.stderr).toMatch(
        /corral: not waiting \(stopped again\): agents s1, s2 of run \S+ may still be running/
      )
      const skippedId = runIdOf(skipped.stdout)!
      await waitFor(() => processesOf(skippedId).length === 0, 20_000, "the runner to stop the agents")
    } finally {
      await db.dispose()
      process.kill(runner.pid, "SIGCONT")
      runner.signal("SIGINT")
      await runner.done
    }
  }, 300_000)

  it("a runner SIGSTOPped while its agents run: the coordinator stops waiting after 10 s, names them on stderr and in the ledger, s1 (its message answered, only its lease left) by its lease's owner", async () => {
    const url = await cluster.database()
    const repo = cluster.scratchRepo()
    const runner = await cluster.startRunner(url, cluster.runnerClone(repo, "stopped"))
    try {
      const marks = cluster.scratch("corral-marks-")
      const plan = writePlan(cluster.scratch("corral-plan-"), "plan.yaml", slowToStopPlan(marks, "0"))
      const cli = cluster.track(startCli(["run", plan, "--cluster", url, "--json"], { cwd: repo }))
      await waitFor(() => NodeFs.readdirSync(marks).length === 2 || !isAlive(cli.pid), 120_000, "both agents started")
      runner.signal("SIGSTOP")
      // s1's Execute message answered while its execution still holds its lease (as between the
      // handler's reply and its lease's release): only the lease can name s1's runner
      // (the test's own database: the only run in it)
      const answered = await rows(
        url,
        "UPDATE cluster_messages SET processed = TRUE WHERE entity_id LIKE '%/s1~%' AND kind = 0 AND NOT processed RETURNING 1"
      )
      expect(answered, "s1's Execute message").toHaveLength(1)
      const signalledAt = Date.now()
      cli.signal("SIGINT")
      const ended = await cli.done
      const waited = Date.now() - signalledAt
      runner.signal("SIGCONT")
      const runId = runIdOf(ended.stdout)!
      expect(ended.code, ended.stderr).toBe(130)
      expect(waited, "the coordinator waited for the bound").toBeGreaterThanOrEqual(10_000)
      expect(ended.stderr).toContain(`waiting for the runners to stop 2 agents (s1, s2 on runner ${runner.address})`)
      expect(ended.stderr).toContain(
        `corral: still running after 10 s: agents s1, s2 of run ${runId} may still be running on runner ${runner.address}`
      )
      const recorded = await rows(
        url,
        `SELECT count(*)::int AS n FROM transition_batches WHERE run_id = '${runId}' AND entries LIKE '%RunnersStillRunning%'`
      )
      expect(recorded, "the ledger records it").toEqual([{ n: 1 }])
      const [batch] = (await rows(
        url,
        `SELECT entries FROM transition_batches WHERE run_id = '${runId}' AND entries LIKE '%RunnersStillRunning%'`
      )) as ReadonlyArray<{ readonly entries: string }>
      const entry = (JSON.parse(batch!.entries) as ReadonlyArray<ReadonlyArray<unknown>>).find(
        (fields) => fields[2] === "RunnersStillRunning"
      )
      expect(JSON.parse(entry![4] as string).running, "the ledger names each agent's runner").toEqual([
        { agent: "s1", runner: runner.address },
        { agent: "s2", runner: runner.address }
      ])
      const status = await runCli(["status", runId, "--cluster", url], { cwd: repo })
      expect(status.code, status.stderr).toBe(0)
      expect(status.stdout).toContain(`left running when the run ended: s1, s2 on runner ${runner.address}`)
      const html = NodePath.join(cluster.scratch("corral-report-"), "report.html")
      const report = await runCli(["report", runId, "--cluster", url, "--html", html], { cwd: repo })
      expect(report.code, report.stderr).toBe(0)
      expect(NodeFs.readFileSync(html, "utf8")).toContain(`s1, s2 on runner ${runner.address}`)
      await waitFor(() => processesOf(runId).length === 0, 30_000, "the resumed runner to stop the agents")
    } finally {
      runner.signal("SIGCONT")
      runner.signal("SIGINT")
      await runner.done
    }
  }, 300_000)
})
