import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { DatabaseSync } from "node:sqlite"
import { describe, expect, it } from "vitest"
import {
  branches,
  fakeTools,
  git,
  isAlive,
  makeRepo,
  pidsIn,
  runCli,
  startCli,
  tempDir,
  waitFor,
  worktrees,
  writePlan
} from "../helpers.ts"

const planOf = (agents: string) => `version: 1\nconcurrency: 3\nagents:\n${agents}`

/** A shell command that runs `first` and exits 1 on its first run, and `then` on every later run (a retried agent). */
const failsOnce = (first: string, then: string): string => {
  const tried = NodePath.join(tempDir("marker-"), "tried")
  return `if [ -e ${tried} ]; then ${then}; else touch ${tried}; ${first}; exit 1; fi`
}

describe("corral run (end to end)", () => {
  it("exits 0 when every agent succeeded and merged; the user's checkout is untouched", async () => {
    const repo = makeRepo({ "README.md": "# test\n", "src/a.ts": "a\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: one
    run: echo one > one.txt
  - id: two
    run: echo two > two.txt
  - id: three
    run: cat one.txt > three.txt
    dependsOn: [one]
`)
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain("3 succeeded")
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:three.txt`)).toBe("one\n")
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(git(repo, "status", "--porcelain")).toBe("")
    expect(git(repo, "branch", "--show-current").trim()).toBe("main")
  })

  it("exits 1 when an agent fails, and 1 when a merge conflicts", async () => {
    const repo = makeRepo({ "config.txt": "workers=2\n" })
    const dir = tempDir("plan-")
    const failing = await runCli(["run", writePlan(dir, "fail.yaml", planOf("  - id: bad\n    run: exit 3\n"))], {
      cwd: repo
    })
    expect(failing.code).toBe(1)
    expect(failing.stdout).toContain('process "bad" exited with code 3')
    // each edits only once both have started, so both edit the same base whatever the machine's load
    const sync = tempDir("sync-")
    const conflicting = await runCli(
      [
        "run",
        writePlan(
          dir,
          "conflict.yaml",
          planOf(`  - id: up
    run: touch ${sync}/up; while [ ! -e ${sync}/down ]; do sleep 0.05; done; sed -i s/=2/=8/ config.txt
  - id: down
    run: touch ${sync}/down; while [ ! -e ${sync}/up ]; do sleep 0.05; done; sed -i s/=2/=1/ config.txt
`)
        )
      ],
      { cwd: repo }
    )
    expect(conflicting.code).toBe(1)
    expect(conflicting.stdout).toMatch(/merge conflict in config.txt/)
    expect(branches(repo).some((b) => /\/(up|down)$/.test(b))).toBe(true)
  })

  it.each([
    ["bad YAML", "agents: [\n  - id: a\n", "line"],
    ["an unknown field", planOf("  - id: a\n    run: echo\n    colour: red\n"), "agents[0].colour: unknown field"],
    [
      "an unknown dependency",
      planOf("  - id: a\n    run: echo\n    dependsOn: [ghost]\n"),
      'the plan\'s agents are "a" (agent "a", line 6)'
    ],
    [
      "a cycle",
      planOf("  - id: a\n    run: echo\n    dependsOn: [b]\n  - id: b\n    run: echo\n    dependsOn: [a]\n"),
      "a -> b -> a"
    ],
    [
      "an invalid claim",
      planOf("  - id: a\n    run: echo\n    claims: { write: [/etc/passwd] }\n"),
      "agents[0].claims.write[0]: expected a relative path"
    ],
    [
      "a negative timeout",
      planOf("  - id: two\n    run: echo\n    timeout: -5s\n"),
      "agents[0].timeout: expected a duration"
    ],
    [
      "a claimed pattern",
      planOf('  - id: a\n    run: echo\n    claims: { write: ["src/*.ts"] }\n'),
      'got "src/*.ts"; a claim is a path, not a pattern'
    ],
    [
      "a claim on a named resource with no name",
      planOf('  - id: store\n    run: echo\n    claims: { write: ["db:"] }\n'),
      'agents[0].claims.write[0]: expected a relative path or a named resource like "db:users", got "db:"; a named resource needs a name after ":", like "db:users" (agent "store", line 6)'
    ],
    [
      "a named resource written with a space after its colon",
      planOf('  - id: store\n    run: echo\n    claims: { write: ["db: users"] }\n'),
      'agents[0].claims.write[0]: expected a relative path or a named resource like "db:users", got "db: users"; a named resource has no space after ":", so write "db:users" for the resource, or "./db: users" for the path (agent "store", line 6)'
    ],
    [
      "an agent's invalid claim, named by its id",
      planOf("  - id: two\n    run: echo\n    claims: { write: [../x] }\n"),
      '(agent "two", line 6)'
    ]
  ])("exits 2 for %s, names the location and starts nothing", async (_name, text, location) => {
    const repo = makeRepo()
    const marker = NodePath.join(repo, "ran.txt")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", text.replace(/run: echo\n/g, `run: echo > ${marker}\n`))
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(plan)
    expect(result.stderr).toContain(location)
    expect(NodeFs.existsSync(marker)).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral"))).toBe(false)
    expect(branches(repo)).toEqual(["main"])
  })

  it("a file named db: at the repository's root is claimed as ./db: and merged", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: store\n    run: echo stored > 'db:'\n    claims: { write: ["./db:"] }\n`)
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    expect(git(repo, "show", `corral/${runId}/integration:db:`)).toBe("stored\n")
  })

  it("a retry runs after an attempt that failed with changed files: that attempt's workspace is kept, the retry gets its own", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: flaky\n    retries: 1\n    run: ${failsOnce("echo partial > out.txt", "echo good > out.txt")}\n`)
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toMatch(/flaky: merged/)
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    expect(git(repo, "show", `corral/${runId}/integration:out.txt`)).toBe("good\n")
    const kept = NodePath.join(repo, ".corral", "worktrees", runId, "flaky")
    expect(result.stdout).toContain(kept)
    expect(NodeFs.readFileSync(NodePath.join(kept, "out.txt"), "utf8")).toBe("partial\n")
    expect(branches(repo)).toContain(`corral/${runId}/flaky`)
  })

  it("status and logs name each attempt's folder and log; each attempt's log is kept", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        `  - id: flaky\n    retries: 1\n    run: ${failsOnce("echo first try; echo partial > out.txt", "echo second try; echo good > out.txt")}\n`
      )
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    const worktrees = NodePath.join(repo, ".corral", "worktrees", runId)
    const logs = NodePath.join(repo, ".corral", "runs", runId, "logs")
    const status = await runCli(["status"], { cwd: repo })
    expect(status.code, status.stderr).toBe(0)
    expect(status.stdout).toContain(
      `attempt 1: folder ${NodePath.join(worktrees, "flaky")}, log ${NodePath.join(logs, "flaky@attempt-1.log")}`
    )
    expect(status.stdout).toContain(
      `attempt 2: folder ${NodePath.join(worktrees, "flaky-attempt-2")} (removed), log ${NodePath.join(logs, "flaky.log")}`
    )
    expect(NodeFs.readFileSync(NodePath.join(logs, "flaky@attempt-1.log"), "utf8")).toContain("[out] first try")
    const shown = await runCli(["logs", "flaky"], { cwd: repo })
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain("[out] second try")
    expect(shown.stdout).not.toContain("[out] first try")
    expect(shown.stderr).toContain("agent flaky: the output of attempt 2; each attempt's folder and log:")
    expect(shown.stderr).toContain(`attempt 1: folder ${NodePath.join(worktrees, "flaky")}, log`)
  })

  it("an attempt's kept log is not another agent's: beside an agent whose id is <agent>.attempt-1, both logs stay", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        `  - id: flaky.attempt-1\n    run: echo the other agent\n  - id: flaky\n    dependsOn: [flaky.attempt-1]\n    retries: 1\n    run: ${failsOnce("echo first try", "echo second try")}\n`
      )
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const other = await runCli(["logs", "flaky.attempt-1"], { cwd: repo })
    expect(other.stdout).toContain("[out] the other agent")
    expect(other.stdout).not.toContain("first try")
    const status = await runCli(["status"], { cwd: repo })
    const first = /attempt 1: folder \S+ \(removed\), log (\S+)/.exec(status.stdout)?.[1]
    expect(first, status.stdout).toBeDefined()
    expect(NodeFs.readFileSync(first!, "utf8")).toContain("[out] first try")
  })

  it("logs of an agent whose last attempt started no process prints the last attempt's log there is, saying so", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        "  - id: flaky\n    retries: 1\n    run: echo first try; echo partial > out.txt; mkdir -p ../flaky-attempt-2/x; exit 1\n"
      )
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stdout).toContain("could not create worktree")
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    const first = NodePath.join(repo, ".corral", "runs", runId, "logs", "flaky@attempt-1.log")
    const shown = await runCli(["logs", "flaky"], { cwd: repo })
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toContain("[out] first try")
    expect(shown.stderr).toContain(
      `agent flaky: attempt 2 ended failed without starting a process; the output of attempt 1 (${first}):`
    )
  })

  it("logs --follow goes on into the next attempt's log from its start", async () => {
    const repo = makeRepo()
    const marks = tempDir("marker-")
    const tried = NodePath.join(marks, "tried")
    const gate = NodePath.join(marks, "go")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        `  - id: flaky\n    retries: 1\n    run: if [ -e ${tried} ]; then echo second try; else touch ${tried}; echo first try ${"x".repeat(200)}; while [ ! -e ${gate} ]; do sleep 0.05; done; exit 1; fi\n`
      )
    )
    const cli = startCli(["run", plan], { cwd: repo })
    const runs = NodePath.join(repo, ".corral", "runs")
    const firstLog = () =>
      (NodeFs.existsSync(runs) ? NodeFs.readdirSync(runs) : [])
        .map((runId) => NodePath.join(runs, runId, "logs", "flaky.log"))
        .find((file) => NodeFs.existsSync(file) && NodeFs.readFileSync(file, "utf8").includes("first try"))
    await waitFor(() => firstLog() !== undefined, 30_000, "the first attempt's output")
    const follow = startCli(["logs", "flaky", "--follow"], { cwd: repo })
    await waitFor(() => follow.output().includes("first try"), 20_000, "the followed output")
    NodeFs.writeFileSync(gate, "")
    const followed = await follow.done
    expect(followed.code, followed.stderr).toBe(0)
    expect(followed.stdout).toMatch(/first try[\s\S]*second try/)
    expect(followed.stderr).toContain("agent flaky: the next attempt's output follows")
    expect((await cli.done).code).toBe(0)
  })

  it("a retry's folder is not another agent's: beside an agent whose id is <agent>-attempt-2, the retry takes flaky-attempt-2.2", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nconcurrency: 1\nagents:\n  - id: flaky-attempt-2\n    run: echo other > other.txt; exit 1\n  - id: flaky\n    retries: 1\n    run: ${failsOnce("echo partial > out.txt", "echo good > out.txt")}\n`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stdout, result.stdout + result.stderr).toMatch(/flaky: merged/)
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    expect(git(repo, "show", `corral/${runId}/integration:out.txt`)).toBe("good\n")
    const worktrees = NodePath.join(repo, ".corral", "worktrees", runId)
    expect(NodeFs.readFileSync(NodePath.join(worktrees, "flaky-attempt-2", "other.txt"), "utf8")).toBe("other\n")
    expect(NodeFs.readFileSync(NodePath.join(worktrees, "flaky", "out.txt"), "utf8")).toBe("partial\n")
    expect(branches(repo)).toEqual(expect.arrayContaining([`corral/${runId}/flaky`, `corral/${runId}/flaky-attempt-2`]))
    expect(branches(repo)).not.toContain(`corral/${runId}/flaky-attempt-2.2`)
  })

  it("every attempt that failed with changed files keeps its own workspace; corral discard removes them all", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf("  - id: broken\n    retries: 2\n    run: echo partial > out.txt; exit 1\n")
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    const worktrees = NodePath.join(repo, ".corral", "worktrees", runId)
    const names = ["broken", "broken-attempt-2", "broken-attempt-3"]
    for (const name of names) expect(result.stdout).toContain(NodePath.join(worktrees, name))
    expect(NodeFs.readdirSync(worktrees).sort()).toEqual(names)
    expect(branches(repo)).toEqual(expect.arrayContaining(names.map((name) => `corral/${runId}/${name}`)))
    const discarded = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(discarded.code, discarded.stdout + discarded.stderr).toBe(0)
    expect(branches(repo)).toEqual(["main"])
    expect(NodeFs.existsSync(worktrees)).toBe(false)
  })

  it("a 60-character id's tenth attempt after kept ones takes a valid folder and branch of 64 characters", async () => {
    const repo = makeRepo()
    const id = `a${"b".repeat(58)}c`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: ${id}\n    retries: 9\n    run: echo partial > out.txt; exit 1\n`)
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stdout).toContain("attempt 10")
    const runId = /run (\S+):/.exec(result.stdout)![1]!
    const worktrees = NodePath.join(repo, ".corral", "worktrees", runId)
    const names = [
      id,
      ...Array.from({ length: 8 }, (_, i) => `${id.slice(0, 54)}-attempt-${i + 2}`),
      `${id.slice(0, 53)}-attempt-10`
    ]
    expect(names.map((name) => name.length)).toEqual([60, ...Array(9).fill(64)])
    expect(NodeFs.readdirSync(worktrees).sort()).toEqual([...names].sort())
    for (const name of names) {
      expect(NodeFs.readFileSync(NodePath.join(worktrees, name, "out.txt"), "utf8")).toBe("partial\n")
      expect(git(repo, "check-ref-format", "--branch", `corral/${runId}/${name}`).trim()).toBe(
        `corral/${runId}/${name}`
      )
    }
    expect(branches(repo).sort()).toEqual(["main", ...names.map((name) => `corral/${runId}/${name}`)].sort())
    const discarded = await runCli(["discard", runId, "--yes"], { cwd: repo })
    expect(discarded.code, discarded.stdout + discarded.stderr).toBe(0)
    expect(branches(repo)).toEqual(["main"])
  }, 120_000)

  it("exits 2 for a missing plan file and for a folder that is not a git repository", async () => {
    const repo = makeRepo()
    const missing = await runCli(["run", "/nonexistent/plan.yaml"], { cwd: repo })
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("/nonexistent/plan.yaml")
    const plain = tempDir("not-git-")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", planOf("  - id: a\n    run: echo hi\n"))
    const notGit = await runCli(["run", plan, "--repo", plain], { cwd: repo })
    expect(notGit.code).toBe(2)
    expect(notGit.stderr).toMatch(/not inside a git repository/i)
    expect(notGit.stderr).toContain("--isolation directory or none")
    expect(notGit.stderr, "the command's words, not the library's").not.toContain("strategy")
    expect(NodeFs.readdirSync(plain), "nothing written into a folder that is not a repository").toEqual([])
    const bare = tempDir("bare-")
    git(bare, "clone", "--quiet", "--bare", repo, "repo.git")
    const inBare = await runCli(["run", plan, "--repo", NodePath.join(bare, "repo.git")], { cwd: repo })
    expect(inBare.code).toBe(2)
    expect(inBare.stderr).toMatch(/bare/)
    expect(NodeFs.existsSync(NodePath.join(bare, "repo.git", ".corral"))).toBe(false)
    const unborn = tempDir("no-commit-")
    git(unborn, "init", "--quiet")
    const noCommit = await runCli(["run", plan, "--repo", unborn], { cwd: repo })
    expect(noCommit.code).toBe(2)
    expect(noCommit.stderr).toMatch(/at least one commit/)
    expect(NodeFs.readdirSync(unborn), "nothing written into a repository without a commit").toEqual([".git"])
    const file = NodePath.join(tempDir("state-"), "a-file")
    NodeFs.writeFileSync(file, "")
    const stateIsFile = await runCli(["run", plan, "--state-dir", file], { cwd: repo })
    expect(stateIsFile.code, stateIsFile.stderr).toBe(2)
    expect(stateIsFile.stderr).toContain(file)
    expect(stateIsFile.stderr).not.toMatch(/\n\s+at /)
    const flags = await runCli(["run", plan, "--mode", "sometimes"], { cwd: repo })
    expect(flags.code).toBe(2)
  })

  it("warns once per agent about a secret that is not set in corral's environment; the agent still runs", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf("  - id: a\n    run: echo hi\n    secrets: [CORRAL_PROBE_SET, CORRAL_PROBE_UNSET]\n")
    )
    const env = { CORRAL_PROBE_SET: "s3cret" }
    const plain = await runCli(["run", plan], { cwd: repo, env })
    expect(plain.code, plain.stdout + plain.stderr).toBe(0)
    expect(plain.stdout + plain.stderr).toContain(
      "warning: agent a: secret CORRAL_PROBE_UNSET is not set in corral's environment; the agent runs without it"
    )
    expect(plain.stdout + plain.stderr).not.toContain("CORRAL_PROBE_SET is not set")
    const json = await runCli(["run", plan, "--json"], { cwd: repo, env })
    expect(json.stderr.split("CORRAL_PROBE_UNSET is not set")).toHaveLength(2)
    expect(json.stdout, "stdout keeps only JSON events").not.toContain("CORRAL_PROBE_UNSET")
  })

  it("--json prints parseable events whose progress always adds up", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: a
    run: echo a > a.txt
    claims: { write: [shared.txt] }
  - id: b
    run: echo b > b.txt
    claims: { write: [shared.txt] }
  - id: c
    run: exit 1
`)
    )
    const result = await runCli(["run", plan, "--json"], { cwd: repo })
    expect(result.code).toBe(1)
    const events = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
    const types = events.map((e) => e.type)
    expect(types[0]).toBe("RunStarted")
    expect(types.at(-1)).toBe("RunFinished")
    expect(types).toContain("WaitingForClaims")
    for (const event of events.filter((e) => e.progress !== undefined)) {
      const p = event.progress
      expect(p.pending + p.running + p.done).toBe(p.total)
      expect(p.running).toBeLessThanOrEqual(3)
    }
    const finished = events.filter((e) => e.type === "Finished")
    expect(finished.map((e) => `${e.agentId}:${e.outcome.message ?? ""}`).join("\n")).not.toContain("a:process")
    expect(finished.map((e) => `${e.agentId}:${e.outcome.type}`).sort()).toEqual([
      "a:Succeeded",
      "b:Succeeded",
      "c:Failed"
    ])
    expect(result.stderr).toContain("run ")
  })

  it("Ctrl-C stops every agent, removes the workspaces, prints the summary and exits 130", async () => {
    const repo = makeRepo()
    const pids = tempDir("pids-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        [0, 1, 2, 3]
          .map((i) => `  - id: sleeper-${i}\n    run: sh -c 'echo $$ > ${pids}/${i}; sleep 300 & wait'\n`)
          .join("")
      )
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidsIn(pids, 3) !== undefined, 20_000, "three agents to start")
    const started = pidsIn(pids, 3)!
    cli.signal("SIGINT")
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(130)
    expect(result.stdout).toMatch(/interrupted/)
    expect(result.stdout).toMatch(/cancelled/)
    expect(result.stdout).toMatch(/interrupted \(Ctrl-C\)/)
    expect(result.stdout).not.toMatch(/merged work|git merge/)
    for (const pid of started) expect(isAlive(pid), `pid ${pid}`).toBe(false)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(branches(repo), "nothing merged: no integration branch either").toEqual(["main"])
  })

  it("a second Ctrl-C during cleanup says cleanup is in progress", async () => {
    const repo = makeRepo()
    const pids = tempDir("pids-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      // it ignores SIGTERM and never ends by itself: the cleanup lasts the whole kill grace (2 s)
      planOf(`  - id: stubborn\n    run: sh -c 'trap "" TERM; echo $$ > ${pids}/pid; sleep 300'\n`)
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => NodeFs.readdirSync(pids).length === 1, 20_000, "the agent to start")
    cli.signal("SIGINT")
    await waitFor(() => cli.output().includes("stopping agents"), 10_000, "the stop notice")
    cli.signal("SIGINT")
    const result = await cli.done
    expect(result.code).toBe(130)
    expect(result.stdout + result.stderr).toContain("cleanup in progress")
  })

  it("SIGHUP (its terminal closed) stops the run like Ctrl-C: agents stopped, workspaces removed, exit 129", async () => {
    const repo = makeRepo()
    const pids = tempDir("pids-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(
        [0, 1].map((i) => `  - id: sleeper-${i}\n    run: sh -c 'echo $$ > ${pids}/${i}; sleep 300 & wait'\n`).join("")
      )
    )
    const cli = startCli(["run", plan], { cwd: repo })
    await waitFor(() => pidsIn(pids, 2) !== undefined, 20_000, "both agents to start")
    const started = pidsIn(pids, 2)!
    cli.signal("SIGHUP")
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(129)
    expect(result.stdout).toMatch(/received SIGHUP/)
    for (const pid of started) expect(isAlive(pid), `pid ${pid}`).toBe(false)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(
      NodeFs.readdirSync(NodePath.join(repo, ".git", "corral", "runs")).filter((f) => f.endsWith(".json"))
    ).toEqual([])
    const status = await runCli(["status"], { cwd: repo })
    expect(status.stdout).toMatch(/: interrupted \(received SIGHUP\)/)
  })

  it("Ctrl-C while the run is being prepared stops it: no agent runs, exit 130", async () => {
    const repo = makeRepo({ "README.md": "# test\n", "src/a.ts": "a\n" })
    const gate = tempDir("gate-")
    const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()
    // git blocks while corral hashes the agents' inputs, before the run starts any agent
    const bin = fakeTools({
      git: `#!/bin/sh
case "$GIT_INDEX_FILE" in *corral-inputs-*) touch ${gate}/hashing; while [ ! -e ${gate}/go ]; do sleep 0.02; done;; esac
exec ${realGit} "$@"
`
    })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: a\n    run: echo done > out.txt\n    inputs: ["src/**"]\n`)
    )
    const cli = startCli(["run", plan], { cwd: repo, env: { PATH: `${bin}:${process.env.PATH}` } })
    try {
      await waitFor(() => NodeFs.existsSync(NodePath.join(gate, "hashing")), 20_000, "the inputs' hashing")
      cli.signal("SIGINT")
      await waitFor(() => cli.output().includes("stopping"), 10_000, "the stop notice")
    } finally {
      NodeFs.writeFileSync(NodePath.join(gate, "go"), "")
    }
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(130)
    expect(result.stdout).toMatch(/a\s+.*cancelled/)
    expect(result.stdout).not.toMatch(/merged work|git merge/)
    expect(branches(repo), "nothing merged: no integration branch either").toEqual(["main"])
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
    expect(git(repo, "status", "--porcelain"), "the state folder shows in the checkout").toBe("")
  })
})

/**
 * `corral run --json` of a one-agent plan in a new repository, told to wait at `point`
 * (`CORRAL_TEST_WAIT_AT`) until `release` is called; `waiting` is true once it waits there.
 */
const heldRun = (point: string) => {
  const repo = makeRepo()
  const gate = tempDir("gate-")
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planOf("  - id: a\n    run: echo done > out.txt\n"))
  const cli = startCli(["run", plan, "--json"], {
    cwd: repo,
    env: { CORRAL_TEST_WAIT_AT: `${point}:run:${NodePath.join(gate, "go")}` }
  })
  return {
    repo,
    cli,
    waiting: () => NodeFs.existsSync(NodePath.join(gate, "go.waiting")),
    release: () => NodeFs.writeFileSync(NodePath.join(gate, "go"), "")
  }
}

describe("a run that merges nothing (end to end)", () => {
  it("leaves no integration branch; --resume-from it still runs, and gc removes an older corral's leftover", async () => {
    const repo = makeRepo()
    const marks = tempDir("marks-")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf(`  - id: same
    run: "true"
  - id: late
    run: test -e ${marks}/ready && echo done > late.txt
`)
    )
    const first = await runCli(["run", plan], { cwd: repo })
    expect(first.code, first.stdout).toBe(1)
    const runId = /run (\d{8}-\d{6}-[a-z0-9]+)/.exec(first.stdout)?.[1]
    expect(runId, first.stdout).toBeDefined()
    expect(first.stdout).not.toContain("git merge")
    expect(branches(repo), "nothing merged, nothing to take").toEqual(["main"])
    NodeFs.writeFileSync(NodePath.join(marks, "ready"), "")
    const resumed = await runCli(["run", plan, "--resume-from", runId!], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    const merged = branches(repo).filter((b) => b !== "main")
    expect(merged, "the resumed run merged late's work").toHaveLength(1)
    expect(git(repo, "show", `${merged[0]}:late.txt`)).toBe("done\n")
    git(repo, "branch", `corral/${runId}/integration`, "main")
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    expect(gc.stdout).toContain(`corral/${runId}/integration`)
    expect(branches(repo).sort()).toEqual([merged[0], "main"].sort())
  })

  it("a run that fails after creating its integration branch, before its first agent, leaves no branch; --resume-from it runs", async () => {
    const repo = makeRepo()
    const state = tempDir("state-")
    // The rate limiter's table made by someone else: its migration fails once the integration branch exists.
    const locks = new DatabaseSync(NodePath.join(state, "locks.db"))
    locks.exec("CREATE TABLE rate_buckets (x)")
    locks.close()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `rateLimits: { api: { limit: 5, interval: 1 minute } }\n${planOf("  - id: one\n    rateLimit: api\n    run: echo one > one.txt\n")}`
    )
    const failed = await runCli(["run", plan, "--state-dir", state], { cwd: repo })
    expect(failed.code, failed.stdout + failed.stderr).toBe(1)
    expect(failed.stderr).toContain("the claim table failed")
    expect(branches(repo), "nothing merged, nothing to take").toEqual(["main"])
    const runId = /^(\d{8}-\d{6}-[a-z0-9]+)\s/m.exec(
      (await runCli(["runs", "--state-dir", state], { cwd: repo })).stdout
    )?.[1]
    expect(runId).toBeDefined()
    NodeFs.rmSync(NodePath.join(state, "locks.db"))
    const resumed = await runCli(["run", plan, "--state-dir", state, "--resume-from", runId!], { cwd: repo })
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0)
    const merged = branches(repo).filter((b) => b !== "main")
    expect(merged).toHaveLength(1)
    expect(git(repo, "show", `${merged[0]}:one.txt`)).toBe("one\n")
  })

  it("gc keeps a failed agent's own commits and says no branch holds them, not a deleted integration branch", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      planOf("  - id: broken\n    run: echo x > f && git add f && git commit -qm x && exit 1\n")
    )
    const result = await runCli(["run", plan], {
      cwd: repo,
      env: { GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@l", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@l" }
    })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    const kept = branches(repo).find((b) => b.endsWith("/broken"))!
    expect(branches(repo).sort()).toEqual([kept, "main"].sort())
    const gc = await runCli(["gc"], { cwd: repo })
    expect(gc.code, gc.stdout + gc.stderr).toBe(0)
    expect(gc.stdout).toContain(`kept branch ${kept}: ${kept} has commits that none of your branches contain`)
  })
})

describe("a stop request after the run finished (end to end)", () => {
  it.each([
    ["the run recorded its end", "finished"],
    ["corral printed the summary", "exiting"]
  ])("SIGTERM after %s: exit 0, the run stays succeeded", async (_, point) => {
    const { repo, cli, release } = heldRun(point)
    try {
      const shown = point === "finished" ? '"type":"RunFinished"' : "1 succeeded"
      await waitFor(() => cli.output().includes(shown), 20_000, "the run's end")
      cli.signal("SIGTERM")
      if (point === "finished") await waitFor(() => cli.output().includes("SIGTERM"), 10_000, "the stop notice")
      else await waitFor(() => cli.output().includes("corral is exiting"), 10_000, "the exit notice")
    } finally {
      release()
    }
    const result = await cli.done
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stderr).toMatch(/1 succeeded/)
    const runs = await runCli(["runs"], { cwd: repo })
    expect(runs.stdout).toMatch(/succeeded/)
  })
})

/**
 * Waits, blocking this process (a poll of `/proc/<pid>/status` every few microseconds), until `pid`
 * no longer catches `signal` or has exited (at most 30 s); sends it `signal` in the first case. True
 * when it sent it.
 */
const signalOnceUncaught = (pid: number, signal: "SIGTERM" | "SIGINT"): boolean => {
  const bit = 1n << BigInt(NodeOs.constants.signals[signal] - 1)
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    let status: string
    try {
      status = NodeFs.readFileSync(`/proc/${pid}/status`, "latin1")
    } catch {
      return false
    }
    if (/^State:\s+Z/m.test(status)) return false
    const caught = BigInt(`0x${/^SigCgt:\s+([0-9a-f]+)/m.exec(status)![1]}`)
    if ((caught & bit) === 0n) {
      process.kill(pid, signal)
      return true
    }
  }
  return false
}

describe("a signal while corral exits after its run (end to end)", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s as soon as corral stops catching it: none such instant, exit 0",
    async (signal) => {
      const { cli, release } = heldRun("exiting")
      await waitFor(() => cli.output().includes("1 succeeded"), 20_000, "the summary")
      release()
      const sent = signalOnceUncaught(cli.pid, signal)
      const result = await cli.done
      expect({ sent, code: result.code, signal: result.signal }, result.stderr).toEqual({
        sent: false,
        code: 0,
        signal: null
      })
    }
  )
})

describe("sparse workspaces (end to end)", () => {
  it("an agent with sparse: true sees only the folders it claims, and its work still merges", async () => {
    const repo = makeRepo({ "README.md": "# r\n", "pkg1/a.txt": "a\n", "pkg2/b.txt": "b\n", "pkg3/c.txt": "c\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
agents:
  - id: narrow
    sparse: true
    claims: { write: [pkg1/out.txt] }
    run: test -e pkg1/a.txt && test ! -e pkg2/b.txt && test -e README.md && echo done > pkg1/out.txt
`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:pkg1/out.txt`)).toBe("done\n")
    expect(git(repo, "show", `${integration}:pkg2/b.txt`)).toBe("b\n")
  })
})

describe("a stop request while corral loads its modules (end to end)", () => {
  it.each([
    ["SIGINT", 130],
    ["SIGTERM", 130],
    ["SIGHUP", 129]
  ] as const)("%s: exit %i, nothing started, nothing written", async (signal, code) => {
    const { repo, cli, waiting, release } = heldRun("loading")
    try {
      await waitFor(waiting, 20_000, "the loading wait point")
      cli.signal(signal)
      await waitFor(() => !isAlive(cli.pid), 20_000, "corral to exit at the wait point")
    } finally {
      release()
    }
    const result = await cli.done
    expect({ code: result.code, signal: result.signal }, result.stdout + result.stderr).toEqual({ code, signal: null })
    expect(result.stdout + result.stderr).toBe("")
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral")), "the state folder").toBe(false)
    expect(git(repo, "status", "--porcelain")).toBe("")
  })
})

describe("a stop request Node holds until corral's modules are loaded (end to end)", () => {
  it.each([
    ["SIGINT", 130],
    ["SIGTERM", 130],
    ["SIGHUP", 129]
  ] as const)("%s: reaches the command's own handlers, exit %i, no agent runs", async (signal, code) => {
    const { repo, cli, waiting, release } = heldRun("loaded-busy")
    try {
      await waitFor(waiting, 20_000, "the loaded-busy wait point")
      cli.signal(signal)
    } finally {
      release()
    }
    const result = await cli.done
    expect({ code: result.code, signal: result.signal }, result.stdout + result.stderr).toEqual({ code, signal: null })
    expect(result.stdout, "no agent succeeded").not.toMatch(/"type":"Succeeded"/)
    expect(git(repo, "status", "--porcelain")).toBe("")
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
  })
})
