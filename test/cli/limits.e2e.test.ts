import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import {
  branches,
  fakeTools,
  finishedOutcome,
  jsonEvents,
  makeRepo,
  runCli,
  startCli,
  tempDir,
  worktrees,
  writePlan
} from "../helpers.ts"
import { hangingGit } from "./support/stalls.ts"

describe("plan limits (end to end)", () => {
  it("an agent with diskMb 50 that writes 200 MB fails, classified as over its disk limit", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: filler
    limits: { diskMb: 50, cpuPercent: 50 }
    run: for i in $(seq 200); do head -c 1048576 /dev/zero >> "$TMPDIR/fill.bin"; done; sleep 60
  - id: fine
    limits: { diskMb: 50 }
    run: echo ok > ok.txt
`
    )
    const result = await runCli(["run", plan, "--json"], { cwd: repo })
    expect(result.code, result.stderr).toBe(1)
    const finished = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; agentId?: string; outcome?: Record<string, unknown> })
      .filter((event) => event.type === "Finished")
    const byId = Object.fromEntries(finished.map((event) => [event.agentId, event.outcome]))
    expect(byId.fine?.type).toBe("Succeeded")
    expect(byId.filler?.type).toBe("Failed")
    expect(JSON.stringify(byId.filler)).toMatch(/exceeded its disk limit \(50 MB, \d+ MB used\)/)
  }, 120_000)
})

/** A `--require` hook that writes corral's own peak RSS (KiB) to `<dir>/<pid>` when it exits. */
const peakRssHook = (dir: string): string => {
  const hook = NodePath.join(dir, "peak-rss.cjs")
  NodeFs.writeFileSync(
    hook,
    `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(dir)} + "/" + process.pid, String(process.resourceUsage().maxRSS)))\n`
  )
  return hook
}

/** Runs `plan` (`--json`) in a fresh repository with the peak-RSS hook: its events and corral's peak RSS in MB. */
const runMeasured = async (planYaml: string) => {
  const repo = makeRepo({ "README.md": "# test\n" })
  const plan = writePlan(tempDir("plan-"), "plan.yaml", planYaml)
  const rss = tempDir("rss-")
  const cli = startCli(["run", plan, "--json"], { cwd: repo, env: { NODE_OPTIONS: `--require ${peakRssHook(rss)}` } })
  const result = await cli.done
  const peakMb = Number(NodeFs.readFileSync(NodePath.join(rss, String(cli.pid)), "utf8")) / 1024
  return { repo, result, events: jsonEvents(result.stdout), peakMb }
}

describe("result files (end to end)", () => {
  it("a result file over the limit fails its agent without being read; the others go on", async () => {
    const { repo, result, events, peakMb } = await runMeasured(`agents:
  - id: huge
    run: truncate -s 300M "$CORRAL_RESULT_FILE"
  - id: capped
    limits: { maxResultBytes: 1000 }
    run: printf '"%02000d"' 0 > "$CORRAL_RESULT_FILE"
  - id: fine
    run: echo '{"ok":true}' > "$CORRAL_RESULT_FILE"
`)
    expect(result.code, result.stderr).toBe(1)
    expect(finishedOutcome(events, "fine")).toMatchObject({ type: "Succeeded" })
    const huge = JSON.stringify(finishedOutcome(events, "huge"))
    expect(huge).toMatch(/"type":"Failed"/)
    expect(huge).toMatch(
      /process \\"huge\\" exceeded its result size limit \(8388608 bytes\): [^ ]+result\.json is 314572800 bytes/
    )
    expect(JSON.stringify(finishedOutcome(events, "capped"))).toMatch(
      /process \\"capped\\" exceeded its result size limit \(1000 bytes\): [^ ]+ is 2002 bytes/
    )
    expect(peakMb, "corral read no more than the limit").toBeLessThan(250)
    expect(NodeFs.statSync(NodePath.join(repo, ".corral", "ledger.db")).size).toBeLessThan(1024 * 1024)
  }, 120_000)
})

describe("usage files (end to end)", () => {
  it("a usage file over the limit fails its agent; a huge line is skipped with a warning; corral's memory stays bounded", async () => {
    const { result, events, peakMb } = await runMeasured(`agents:
  - id: huge
    run: truncate -s 300M "$CORRAL_USAGE_FILE"
  - id: longline
    limits: { maxUsageBytes: 400000000 }
    run: |
      truncate -s 300M "$CORRAL_USAGE_FILE"
      echo >> "$CORRAL_USAGE_FILE"
      echo '{"inputTokens":7}' >> "$CORRAL_USAGE_FILE"
  - id: fine
    run: echo '{"inputTokens":5,"costUsd":0.01}' >> "$CORRAL_USAGE_FILE"
`)
    expect(result.code, result.stderr).toBe(1)
    expect(finishedOutcome(events, "fine")).toMatchObject({
      type: "Succeeded",
      usage: { inputTokens: 5, costUsd: 0.01 }
    })
    expect(JSON.stringify(finishedOutcome(events, "huge"))).toMatch(
      /process \\"huge\\" exceeded its usage file limit \(8388608 bytes\): [^ ]+usage\.jsonl is 314572800 bytes/
    )
    expect(finishedOutcome(events, "longline")).toMatchObject({ type: "Succeeded", usage: { inputTokens: 7 } })
    const skipped = events.find((event) => event.type === "Notice" && String(event.message).includes('"longline"'))
    expect(skipped?.message).toMatch(
      /agent "longline": [^ ]+usage\.jsonl line 1: 314572800 bytes, longer than 65536 bytes; skipped/
    )
    expect(peakMb, "corral read the usage files in bounded pieces").toBeLessThan(250)
  }, 120_000)
})

/**
 * The agent's timeout: long enough that the steps before the hanging git command (the worktree, the
 * checkout, the agent's command) end before it at any load, as in cluster-limits.
 */
const TIMEOUT_MS = 5000

describe("an agent's timeout and the stop grace (end to end)", () => {
  it.each([
    ["its worktree's creation", "*' worktree add '*", []],
    ["its checkout", "*' read-tree '*", []],
    ["its commit", "*' add --all '*", ["slow"]]
  ])(
    "a git command that hangs past the agent's timeout (%s) is stopped: 1 s to finish, SIGTERM, SIGKILL 1 s later",
    async (_, pattern, kept) => {
      const repo = makeRepo()
      const marks = tempDir("marks-")
      const bin = fakeTools({ git: hangingGit(pattern, marks) })
      const plan = writePlan(
        tempDir("plan-"),
        "plan.yaml",
        `agents:\n  - id: slow\n    timeout: ${TIMEOUT_MS / 1000}s\n    run: echo work > work.txt\n`
      )
      const run = await runCli(["run", plan, "--json"], {
        cwd: repo,
        env: { PATH: `${bin}${NodePath.delimiter}${process.env.PATH}` }
      })
      expect(run.code, run.stdout + run.stderr).toBe(1)
      const events = jsonEvents(run.stdout)
      expect(finishedOutcome(events, "slow")?.type).toBe("TimedOut")
      const started = events.find((event) => event.type === "Started" && event.agentId === "slow")!.at as number
      const finished = events.find((event) => event.type === "Finished" && event.agentId === "slow")!.at as number
      const timedOut = started + TIMEOUT_MS
      const markFile = NodePath.join(marks, "git")
      expect(NodeFs.existsSync(markFile), `the hanging git (${pattern}) started before the timeout`).toBe(true)
      const times = Object.fromEntries(
        NodeFs.readFileSync(markFile, "utf8")
          .trim()
          .split("\n")
          .map((line) => line.split(" "))
          .map(([what, ns]) => [what, Number(BigInt(ns!) / 1_000_000n)])
      )
      expect(times.start!, "the hanging git started before the timeout").toBeLessThan(timedOut)
      console.log(
        `${pattern}: git start ${times.start! - started} ms after Started; TERM ${times.term! - timedOut} ms after the timeout; Finished ${finished - times.term!} ms after TERM`
      )
      expect(times.term, "the git got SIGTERM").toBeDefined()
      expect(times.term! - timedOut, "SIGTERM 1 s after the timeout").toBeGreaterThanOrEqual(900)
      expect(times.term! - timedOut, "SIGTERM not seconds after that").toBeLessThan(3000)
      expect(finished - times.term!, "SIGKILL 1 s after SIGTERM, and the agent ends").toBeLessThan(3000)
      expect(
        worktrees(repo)
          .slice(1)
          .map((dir) => NodePath.basename(dir))
      ).toEqual(kept)
      expect(branches(repo).filter((branch) => branch.endsWith("/slow")).length).toBe(kept.length)
    }
  )
})
