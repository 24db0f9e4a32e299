import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { RunLedger } from "@corral/platform-node"
import { PostgresClient, PostgresLedger } from "@corral/postgres"
import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { describe, expect, it } from "vitest"
import * as Reconcile from "../../apps/cli/src/Reconcile.ts"
import {
  branches,
  git,
  isAlive,
  jsonEvents,
  pidIn,
  runCli,
  startCli,
  waitFor,
  worktrees,
  writePlan
} from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"
import { portBlockWarning, refusePortsPreload } from "./support/stalls.ts"

const cluster = await clusterTests()
const { scratch, scratchRepo, runnerClone: cloneFor, database } = cluster
const startRunner = (url: string, repo: string) => cluster.startRunner(url, repo, { args: ["--capacity", "4"] })

interface Event {
  readonly type: string
  readonly agentId?: string
  readonly agents?: ReadonlyArray<string>
  readonly branch?: string
  readonly paths?: ReadonlyArray<string>
  readonly outcome?: { readonly type: string }
}

const eventsOf = (stdout: string): Array<Event> =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Event)

/** `corral/…` branches and worktrees besides the main one: what a runner must not leave behind. */
const leftovers = (repo: string) => ({
  worktrees: worktrees(repo).filter((dir) => NodeFs.realpathSync(dir) !== NodeFs.realpathSync(repo)),
  branches: branches(repo).filter((branch) => branch.startsWith("corral/"))
})

/** Agents named in `Corral-Agent` trailers of the non-merge commits `base..branch`, one entry per commit. */
const agentCommits = (repo: string, base: string, branch: string) =>
  git(repo, "log", "--no-merges", "--format=%(trailers:key=Corral-Agent,valueonly)%x00", `${base}..${branch}`)
    .split("\0")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "")
    .sort()

/** A folder linking every program of `PATH` but git's: the `PATH` of a machine without git. */
const pathWithoutGit = (): string => {
  const bin = scratch("corral-no-git-bin-")
  const linked = new Set<string>()
  for (const dir of (process.env.PATH ?? "").split(NodePath.delimiter)) {
    if (dir === "" || !NodeFs.existsSync(dir)) continue
    for (const name of NodeFs.readdirSync(dir)) {
      if (name === "git" || name.startsWith("git-") || linked.has(name)) continue
      linked.add(name)
      NodeFs.symlinkSync(NodePath.join(dir, name), NodePath.join(bin, name))
    }
  }
  return bin
}

describe.skipIf(!cluster.available)("corral run --cluster with worktree isolation", () => {
  it("runs each agent in a worktree on a runner, merges every agent's work once, and leaves the checkout and the runners clean", async () => {
    const url = await database()
    const repo = scratchRepo({ "README.md": "# test\n", "shared.txt": "base\n" })
    const head = git(repo, "rev-parse", "HEAD").trim()
    const sync = scratch("corral-sync-")
    const runnerRepos = [cloneFor(repo, "a"), cloneFor(repo, "b")]
    const runners = await Promise.all(runnerRepos.map((dir) => startRunner(url, dir)))
    // left and right each wait until the other has started, so both start from the same base and
    // change shared.txt in ways that cannot both merge, whichever runners they are placed on.
    const meetThen = (me: string, other: string) =>
      `touch ${sync}/${me}; i=0; while [ ! -f ${sync}/${other} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo ${me} > shared.txt`
    const plan = writePlan(
      scratch("corral-plan-"),
      "plan.yaml",
      `version: 1
concurrency: 4
agents:
  - id: alpha
    run: echo alpha > alpha.txt && pwd > where-alpha.txt
    claims: { write: [alpha.txt] }
  - id: beta
    run: echo beta > beta.txt && pwd > where-beta.txt
    claims: { write: [beta.txt] }
  - id: gamma
    dependsOn: [alpha, beta]
    claims: { read: [alpha.txt, beta.txt], write: [gamma.txt] }
    run: cat alpha.txt beta.txt > gamma.txt && pwd > where-gamma.txt
  - id: left
    run: ${JSON.stringify(meetThen("left", "right"))}
  - id: right
    run: ${JSON.stringify(meetThen("right", "left"))}
  - id: broken
    run: echo partial > partial.txt && exit 3
`
    )
    const result = await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
    expect(result.code, result.stderr).toBe(1)
    const events = eventsOf(result.stdout)
    const outcomes = Object.fromEntries(
      events.filter((e) => e.type === "Finished").map((e) => [e.agentId, e.outcome?.type])
    )
    const conflicted = events.filter((e) => e.type === "MergeConflict")
    expect(conflicted.length, result.stdout).toBe(1)
    const loser = conflicted[0]!.agentId!
    const winner = loser === "left" ? "right" : "left"
    expect(conflicted[0]!.paths).toEqual(["shared.txt"])
    expect(outcomes).toEqual({
      alpha: "Succeeded",
      beta: "Succeeded",
      gamma: "Succeeded",
      [winner]: "Succeeded",
      [loser]: "Failed",
      broken: "Failed"
    })
    expect(result.stderr).toMatch(/4 succeeded, 2 failed/)
    expect(result.stderr).toMatch(
      new RegExp(`${loser} conflicts in shared\\.txt; its branch is kept:\\n\\s+corral/\\S+/${loser}\\n`)
    )
    const runId = /run (\S+): 4 succeeded/.exec(result.stderr)![1]!
    const integration = `corral/${runId}/integration`

    // every agent's work exactly once on the integration branch
    expect(agentCommits(repo, head, integration)).toEqual(["alpha", "beta", "gamma", winner].sort())
    // what a resumed run reconciles from git: every merged agent, under this run's id
    const merged = await Effect.runPromise(Reconcile.mergedAgents(repo, integration, new Set([runId])))
    expect([...merged.keys()].sort()).toEqual(["alpha", "beta", "gamma", winner].sort())
    const show = (file: string) => git(repo, "show", `${integration}:${file}`)
    expect(show("alpha.txt")).toBe("alpha\n")
    expect(show("beta.txt")).toBe("beta\n")
    expect(show("gamma.txt")).toBe("alpha\nbeta\n") // the dependent saw both dependencies' files
    expect(show("shared.txt")).toBe(`${winner}\n`)
    expect(git(repo, "ls-tree", "--name-only", integration).split("\n")).not.toContain("partial.txt") // a failed agent's work is not merged
    // each agent ran in a worktree of one of the runners' clones, not in a runner's checkout or the user's
    for (const agent of ["alpha", "beta", "gamma"]) {
      const where = show(`where-${agent}.txt`).trim()
      expect(
        runnerRepos.some((dir) => where.startsWith(NodePath.join(dir, ".corral", "worktrees") + NodePath.sep)),
        where
      ).toBe(true)
    }
    // the same records in the ledger as a local run
    const record = await Effect.runPromise(
      Effect.flatMap(RunLedger.RunLedger, (ledger) => ledger.getRun(runId)).pipe(
        Effect.provide(PostgresLedger.layer(url))
      )
    )
    expect(Object.fromEntries(Option.getOrThrow(record).agents.map((agent) => [agent.agentId, agent.merge]))).toEqual({
      alpha: "merged",
      beta: "merged",
      gamma: "merged",
      [winner]: "merged",
      [loser]: "conflict",
      broken: null
    })
    // the loser's branch is kept in the user's repository with its work; merged agents' branches are gone
    const kept = `corral/${runId}/${loser}`
    expect(
      branches(repo)
        .filter((b) => b.startsWith(`corral/${runId}/`))
        .sort()
    ).toEqual([integration, kept].sort())
    expect(git(repo, "show", `${kept}:shared.txt`)).toBe(`${loser}\n`)

    // the user's checkout is untouched
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(head)
    expect(git(repo, "rev-parse", "--abbrev-ref", "HEAD").trim()).toBe("main")
    expect(git(repo, "status", "--porcelain")).toBe("")
    expect(NodeFs.existsSync(NodePath.join(repo, "alpha.txt"))).toBe(false)

    // runners keep no worktree or branch, and the remote keeps none of the run's branches
    for (const dir of runnerRepos) expect(leftovers(dir), dir).toEqual({ worktrees: [], branches: [] })
    const remote = NodePath.join(repo, ".git", "corral", "remote.git")
    expect(git(remote, "for-each-ref", "--format=%(refname)", `refs/heads/corral/${runId}/`)).toBe("")

    for (const runner of runners) runner.signal("SIGINT")
    for (const runner of runners) expect((await runner.done).code).toBe(130)
  }, 240_000)

  it("--resume continues a worktree run whose coordinator was SIGKILLed after a merge: from its integration head, the merged agent not merged again, the running one taken over", async () => {
    const url = await database()
    const repo = scratchRepo()
    const head = git(repo, "rev-parse", "HEAD").trim()
    const sync = scratch("corral-sync-")
    const runner = await startRunner(url, cloneFor(repo, "r"))
    // first merges only while held runs, so held is running when the coordinator dies after first's merge
    const plan = writePlan(
      scratch("corral-plan-"),
      "plan.yaml",
      `version: 1
concurrency: 4
agents:
  - id: first
    run: while [ ! -e ${sync}/held-started ]; do sleep 0.05; done; echo x >> ${sync}/first-runs; echo first > first.txt
  - id: held
    run: echo x >> ${sync}/held-runs; touch ${sync}/held-started; while [ ! -e ${sync}/release ]; do sleep 0.05; done; echo held > held.txt; touch ${sync}/held-ended
  - id: later
    dependsOn: [first]
    run: cat first.txt > later.txt
`
    )
    const crashed = startCli(["run", plan, "--cluster", url, "--json"], {
      cwd: repo,
      env: { CORRAL_TEST_KILL_AT: "merged:first" }
    })
    const died = await crashed.done
    expect(died.code, crashed.output()).not.toBe(0)
    const [firstIntegration] = branches(repo).filter((b) => b.endsWith("/integration"))
    expect(firstIntegration, crashed.output()).toBeDefined()
    const firstRunId = firstIntegration!.split("/")[1]!
    expect(agentCommits(repo, head, firstIntegration!)).toEqual(["first"])
    const until = Date.now() + 60_000
    let listed = ""
    while (Date.now() < until && !new RegExp(`${firstRunId}\\s+crashed`).test(listed))
      listed = (await runCli(["runs", "--cluster", url], { cwd: repo })).stdout
    expect(listed).toMatch(new RegExp(`${firstRunId}\\s+crashed`))

    // held ends while no coordinator runs; the resumed run picks up its pushed work
    NodeFs.writeFileSync(NodePath.join(sync, "release"), "")
    await waitFor(() => NodeFs.existsSync(NodePath.join(sync, "held-ended")), 60_000, "held to end")
    const resumed = await runCli(["run", plan, "--resume", "--cluster", url, "--json"], { cwd: repo })
    expect(resumed.code, resumed.stderr).toBe(0)
    expect(resumed.stderr).toContain(`first: merged by run ${firstRunId}`)
    const finished = eventsOf(resumed.stdout).filter((e) => e.type === "Finished")
    expect(finished.map((e) => e.agentId).sort()).toEqual(["first", "held", "later"])
    expect((finished.find((e) => e.agentId === "first")!.outcome as { cached?: boolean }).cached).toBe(true)
    const lines = (file: string) => NodeFs.readFileSync(NodePath.join(sync, file), "utf8").trim().split("\n")
    expect(lines("first-runs")).toHaveLength(1)
    expect(lines("held-runs")).toHaveLength(1)

    const integration = branches(repo).find((b) => b.endsWith("/integration") && b !== firstIntegration)!
    expect(git(repo, "merge-base", "--is-ancestor", firstIntegration!, integration)).toBe("")
    expect(agentCommits(repo, head, integration)).toEqual(["first", "held", "later"])
    expect(git(repo, "show", `${integration}:later.txt`)).toBe("first\n")
    expect(git(repo, "show", `${integration}:held.txt`)).toBe("held\n")
    const remote = NodePath.join(repo, ".git", "corral", "remote.git")
    expect(git(remote, "for-each-ref", "--format=%(refname)", "refs/heads/corral/")).toBe("")
    runner.signal("SIGINT")
    expect((await runner.done).code).toBe(130)
  }, 240_000)

  it("rejects an unusable remote or plan with exit 2 before anything starts; a runner without a git repository fails worktree agents", async () => {
    const url = await database()
    const repo = scratchRepo()
    const runner = await startRunner(url, cloneFor(repo, "c"))
    const plan = writePlan(
      scratch("corral-plan-"),
      "plan.yaml",
      "version: 1\nagents:\n  - id: a\n    run: echo a > a.txt\n"
    )
    const missing = NodePath.join(scratch("corral-nowhere-"), "missing.git")
    const unreachable = await runCli(["run", plan, "--cluster", url, "--remote", missing], { cwd: repo })
    expect(unreachable.code, unreachable.stderr).toBe(2)
    expect(unreachable.stderr).toContain(`--remote ${missing}: not a git repository corral can reach`)
    const directory = writePlan(
      scratch("corral-plan-"),
      "plan.yaml",
      "version: 1\nisolation: directory\nagents:\n  - id: a\n    run: echo a\n"
    )
    const unsupported = await runCli(["run", directory, "--cluster", url], { cwd: repo })
    expect(unsupported.code).toBe(2)
    expect(unsupported.stderr).toMatch(/isolation directory is not supported with --cluster/)
    const outside = scratch("corral-not-git-")
    const notGit = await runCli(["run", plan, "--cluster", url], { cwd: outside })
    expect(notGit.code).toBe(2)
    expect(notGit.stderr).toMatch(/is not a git repository/)
    expect(branches(repo)).toEqual(["main"])
    runner.signal("SIGINT")
    expect((await runner.done).code).toBe(130)

    // a runner whose --repo is no git repository fails worktree agents, saying so
    const lonely = await database()
    const misplaced = await startRunner(lonely, scratch("corral-runner-not-git-"))
    const failed = await runCli(["run", plan, "--cluster", lonely], { cwd: repo })
    expect(failed.code, failed.stderr).toBe(1)
    expect(failed.stdout + failed.stderr).toMatch(/--repo \S+ is not a git repository; worktree agents need a clone/)
    misplaced.signal("SIGINT")
    expect((await misplaced.done).code).toBe(130)
  }, 180_000)

  it("a runner without git on its PATH fails worktree and isolation: none agents, naming the runner and git", async () => {
    const url = await database()
    const repo = scratchRepo()
    const runner = await cluster.startRunner(url, cloneFor(repo, "no-git"), { env: { PATH: pathWithoutGit() } })
    const planDir = scratch("corral-plan-")
    const missing = `runner ${runner.address} cannot run git: the git executable was not found on PATH`
    let failedRun: string | undefined
    for (const isolation of ["worktree", "none"]) {
      const plan = writePlan(
        planDir,
        `${isolation}.yaml`,
        `version: 1\nisolation: ${isolation}\nagents:\n  - id: a\n    run: echo a > a.txt\n`
      )
      const failed = await runCli(["run", plan, "--cluster", url], { cwd: repo })
      expect(failed.code, failed.stderr).toBe(1)
      expect(failed.stdout, isolation).toContain(`a: failed: ${missing}`)
      expect(failed.stdout, isolation).not.toMatch(/is not a git repository/)
      if (isolation === "worktree") failedRun = /run (\d{8}-\d{6}-[a-z0-9]+)/.exec(failed.stdout)?.[1]
    }
    expect(branches(repo), "a run that merged nothing leaves no integration branch").toEqual(["main"])
    expect(failedRun).toBeDefined()
    const plan = NodePath.join(planDir, "worktree.yaml")
    const resumed = await runCli(["run", plan, "--cluster", url, "--resume-from", failedRun!], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(1)
    expect(resumed.stdout, "resumed from HEAD, failing on the runner again").toContain(`a: failed: ${missing}`)
    expect(branches(repo)).toEqual(["main"])
    runner.signal("SIGINT")
    expect((await runner.done).code).toBe(130)
  }, 180_000)

  it("a --cluster resume that merges nothing new keeps its branch and says where the lineage's work is", async () => {
    const url = await database()
    const repo = scratchRepo()
    const runner = await startRunner(url, cloneFor(repo, "lineage"))
    try {
      const plan = writePlan(
        scratch("corral-plan-"),
        "plan.yaml",
        "version: 1\nagents:\n  - id: writes\n    run: echo work > work.txt\n  - id: fails\n    run: exit 3\n"
      )
      const first = await runCli(["run", plan, "--cluster", url], { cwd: repo })
      expect(first.code, first.stdout + first.stderr).toBe(1)
      const firstRunId = /^run (\S+): /m.exec(first.stdout)?.[1]
      expect(firstRunId, first.stdout).toBeDefined()
      const resumed = await runCli(["run", plan, "--cluster", url, "--resume-from", firstRunId!], { cwd: repo })
      expect(resumed.code, resumed.stdout + resumed.stderr).toBe(1)
      const runId = /^run (\S+): /m.exec(resumed.stdout)?.[1]
      expect(runId, resumed.stdout).toBeDefined()
      const branch = `corral/${runId}/integration`
      expect(git(repo, "show", `${branch}:work.txt`)).toBe("work\n")
      const head = git(repo, "rev-parse", branch).trim()
      expect(resumed.stdout.replace(/\s+/g, " ")).toContain(
        `no new work merged; the work of the runs this one resumes is on its integration branch (${head.slice(0, 10)}); take it with: git merge ${branch} `
      )
      expect(resumed.stdout).not.toMatch(/merged work of/)
    } finally {
      runner.signal("SIGINT")
      await runner.done
    }
  }, 180_000)

  it("a run that fails after creating its integration branch (the ledger refuses its start) leaves no branch", async () => {
    const url = await database()
    const repo = scratchRepo()
    const runner = await startRunner(url, cloneFor(repo, "refused"))
    try {
      const listed = await runCli(["runs", "--cluster", url], { cwd: repo })
      expect(listed.code, listed.stderr).toBe(0)
      await Effect.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(
            "CREATE FUNCTION refuse_runs() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no new runs here'; END $$ LANGUAGE plpgsql"
          )
          yield* sql.unsafe(
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse_runs()"
          )
        }).pipe(Effect.provide(PostgresClient.layer(url)))
      )
      const plan = writePlan(
        scratch("corral-plan-"),
        "plan.yaml",
        "version: 1\nagents:\n  - id: a\n    run: echo a > a.txt\n"
      )
      const failed = await runCli(["run", plan, "--cluster", url], { cwd: repo })
      expect(failed.code, failed.stdout + failed.stderr).toBe(1)
      expect(failed.stderr, "the server's answer, not only effect's message").toContain(
        "corral: PgConnection: Query failed (no new runs here)"
      )
      expect(branches(repo), "nothing merged, nothing to take").toEqual(["main"])
    } finally {
      runner.signal("SIGINT")
      await runner.done
    }
  }, 180_000)

  it("a runner removes its worktree on Ctrl-C; after a SIGKILL, corral gc on its machine removes what is left", async () => {
    let url = await database()
    const repo = scratchRepo()
    const runnerRepo = cloneFor(repo, "d")
    const pidFile = NodePath.join(scratch("corral-pid-"), "agent.pid")
    const bare = NodePath.join(scratch("corral-remote-"), "scratch.git")
    git(NodePath.dirname(bare), "init", "-q", "--bare", bare)
    const plan = writePlan(
      scratch("corral-plan-"),
      "plan.yaml",
      `version: 1\nagents:\n  - id: slow\n    run: echo work > half-done.txt && echo $$ > ${pidFile} && exec sleep 300\n`
    )
    const agentStarted = () => pidIn(pidFile) !== undefined
    const runUntilStarted = async () => {
      NodeFs.rmSync(pidFile, { force: true })
      const run = startCli(["run", plan, "--cluster", url, "--remote", `file://${bare}`], { cwd: repo })
      await waitFor(agentStarted, 60_000, `the agent to start: ${run.output()}`)
      return { run, agentPid: pidIn(pidFile)! }
    }

    const drained = await startRunner(url, runnerRepo)
    const first = await runUntilStarted()
    expect(leftovers(runnerRepo).worktrees).toHaveLength(1)
    drained.signal("SIGINT")
    expect((await drained.done).code).toBe(130)
    await waitFor(() => !isAlive(first.agentPid), 20_000, "the agent to stop with its runner")
    expect(leftovers(runnerRepo)).toEqual({ worktrees: [], branches: [] })
    first.run.signal("SIGINT")
    await first.run.done

    url = await database() // nothing of the first run is redelivered
    const killed = await startRunner(url, runnerRepo)
    const second = await runUntilStarted()
    const [worktree] = leftovers(runnerRepo).worktrees
    expect(NodeFs.existsSync(NodePath.join(worktree!, "half-done.txt"))).toBe(true)
    killed.signal("SIGKILL")
    await killed.done
    await waitFor(() => !isAlive(second.agentPid), 20_000, "the agent to die with its runner")
    second.run.signal("SIGINT")
    await second.run.done
    expect(leftovers(runnerRepo).worktrees).toEqual([worktree])
    const collected = await runCli(["gc"], { cwd: runnerRepo })
    expect(collected.code, collected.stderr).toBe(0)
    expect(collected.stdout).toContain(worktree!)
    expect(leftovers(runnerRepo)).toEqual({ worktrees: [], branches: [] })
    expect(git(runnerRepo, "status", "--porcelain")).toBe("")
  }, 240_000)

  it("a runner whose --repo is a subfolder of its clone keeps its state at the clone's top, where corral gc looks", async () => {
    const url = await database()
    const repo = scratchRepo({ "README.md": "# test\n", "sub/keep.txt": "sub\n" })
    const runnerRepo = NodeFs.realpathSync(cloneFor(repo, "sub"))
    const sub = NodePath.join(runnerRepo, "sub")
    const marks = scratch("corral-marks-")
    const runner = await startRunner(url, sub)
    for (const isolation of ["worktree", "none"]) {
      const plan = writePlan(
        scratch("corral-plan-"),
        "plan.yaml",
        `version: 1\nisolation: ${isolation}\nagents:\n  - id: a\n    run: pwd > ${marks}/${isolation}-pwd && echo "$CORRAL_AGENT_DIR" > ${marks}/${isolation}-data\n`
      )
      const done = await runCli(["run", plan, "--cluster", url], { cwd: repo })
      expect(done.code, done.stdout + done.stderr).toBe(0)
    }
    NodeFs.writeFileSync(NodePath.join(runnerRepo, ".corral", "secret"), "state\n")
    const boxed = writePlan(
      scratch("corral-plan-"),
      "boxed.yaml",
      `version: 1\nisolation: none\nagents:\n  - id: boxed\n    sandbox: { allow: { read: [".."], write: [${marks}] } }\n    run: cat ../README.md > ${marks}/boxed-top; cat ../.corral/secret > ${marks}/boxed-state; true\n`
    )
    const boxedRun = await runCli(["run", boxed, "--cluster", url], { cwd: repo })
    expect(boxedRun.code, boxedRun.stdout + boxedRun.stderr).toBe(0)
    const read = (file: string) => NodeFs.readFileSync(NodePath.join(marks, file), "utf8").trim()
    expect(read("boxed-top"), "the allowed top is readable").toBe("# test")
    expect(read("boxed-state"), "the top's state folder is hidden under it").toBe("")
    NodeFs.rmSync(NodePath.join(runnerRepo, ".corral", "secret"))
    expect(read("none-pwd")).toBe(sub)
    expect(read("none-data").startsWith(NodePath.join(runnerRepo, ".corral", "agents") + NodePath.sep)).toBe(true)
    expect(read("worktree-pwd").startsWith(NodePath.join(runnerRepo, ".corral", "worktrees") + NodePath.sep)).toBe(true)
    expect(read("worktree-data").startsWith(NodePath.join(runnerRepo, ".corral", "agents") + NodePath.sep)).toBe(true)
    expect(NodeFs.existsSync(NodePath.join(sub, ".corral")), "no state folder in the subfolder").toBe(false)
    expect(NodeFs.readdirSync(NodePath.join(runnerRepo, ".corral", "worktrees")), "no run folder left").toEqual([])
    expect(git(runnerRepo, "status", "--porcelain")).toBe("")
    const collected = await runCli(["gc", "--repo", sub], { cwd: repo })
    expect(collected.code, collected.stderr).toBe(0)
    expect(collected.stdout).toContain("0 removed")
    runner.signal("SIGINT")
    expect((await runner.done).code).toBe(130)
  }, 180_000)
})

describe.skipIf(!cluster.available)("workspace warnings of a cluster runner", () => {
  it("a runner's port block that falls back to private is a Notice on the coordinator, on success and on failure", async () => {
    const url = await database()
    const repo = scratchRepo()
    const dir = scratch("corral-refuse-")
    const refuse = refusePortsPreload(dir)
    const notices = (stdout: string) =>
      jsonEvents<{ type: string; message: string }>(stdout)
        .filter((event) => event.type === "Notice" && /port block/.test(event.message))
        .map((event) => event.message)
    const failing = await cluster.startRunner(url, cloneFor(repo, "refuse-fail"), {
      env: { NODE_OPTIONS: `--import ${refuse}` }
    })
    const failed = await runCli(
      [
        "run",
        writePlan(dir, "fail.yaml", "version: 1\nagents:\n  - id: bad\n    run: exit 3\n"),
        "--cluster",
        url,
        "--json"
      ],
      { cwd: repo }
    )
    expect(failed.code, failed.stderr).toBe(1)
    expect(notices(failed.stdout)).toEqual([portBlockWarning(20000)])
    failing.signal("SIGINT")
    expect((await failing.done).code).toBe(130)
    const runner = await cluster.startRunner(url, cloneFor(repo, "refuse-ok"), {
      args: ["--capacity", "4"],
      env: { NODE_OPTIONS: `--import ${refuse}` }
    })
    const agents = ["one", "two", "three"].map((id) => `  - id: ${id}\n    run: echo "$PORT" > ${dir}/${id}.port\n`)
    const plan = writePlan(dir, "ok.yaml", `version: 1\nisolation: none\nagents:\n${agents.join("")}`)
    const plain = await runCli(["run", plan, "--cluster", url], { cwd: repo })
    expect(plain.code, plain.stderr).toBe(0)
    const lines = plain.stdout.split("\n").filter((line) => /port block/.test(line))
    expect(
      lines.map((line) => line.slice(line.indexOf("warning: "))),
      plain.stdout
    ).toEqual([portBlockWarning(20000)])
    runner.signal("SIGINT")
    expect((await runner.done).code).toBe(130)
  }, 180_000)
})
