import { spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import {
  branches,
  corralBin,
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

/** Starts corral with its stdout on a pipe this test can close, like `corral … | head`. */
const startPiped = (args: ReadonlyArray<string>, cwd: string) => {
  const child = spawn(corralBin, [...args], { cwd, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk) => (stdout += chunk))
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  )
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    closeReader: () => child.stdout.destroy(),
    done
  }
}

const chattyPlan = (pids: string) => `version: 1
concurrency: 3
agents:
  - id: chatty
    run: sh -c 'echo $$ > ${pids}/chatty; while true; do echo tick; sleep 0.05; done'
    claims: { write: [a.txt] }
  - id: quiet
    run: sh -c 'echo $$ > ${pids}/quiet; while [ ! -e ${pids}.go ]; do sleep 0.05; done'
    claims: { write: [b.txt] }
  - id: after
    run: echo never
    dependsOn: [chatty]
`

describe("a closed output (end to end)", () => {
  for (const json of [true, false]) {
    it(`corral run${json ? " --json" : ""} | head: the run stops, is recorded as stopped and exits 141`, async () => {
      const repo = makeRepo()
      const pids = tempDir("pids-")
      const plan = writePlan(tempDir("plan-"), "plan.yaml", chattyPlan(pids))
      const cli = startPiped(["run", plan, ...(json ? ["--json"] : [])], repo)
      await waitFor(() => pidsIn(pids, 2) !== undefined, 20_000, "both agents to start")
      const started = pidsIn(pids, 2)!
      cli.closeReader()
      // corral notices at its next write: --json writes chatty's output, plain output the next state change
      NodeFs.writeFileSync(`${pids}.go`, "")
      const result = await cli.done
      expect(result.code, cli.stderr()).toBe(141)
      expect(cli.stderr()).not.toMatch(/EPIPE|\n\s+at /)
      for (const pid of started) expect(isAlive(pid), `pid ${pid}`).toBe(false)
      expect(NodeFs.readdirSync(NodePath.join(repo, ".corral", "runs")).filter((f) => f.endsWith(".json"))).toEqual([])
      expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
      expect(branches(repo).filter((b) => !b.endsWith("/integration") && b !== "main")).toEqual([])
      const runs = await runCli(["runs"], { cwd: repo })
      expect(runs.stdout).toMatch(/ interrupted /)
      const status = await runCli(["status"], { cwd: repo })
      expect(status.stdout).toMatch(/: interrupted \(output closed\)/)
      expect(status.stdout).toMatch(/chatty\s+interrupted .*output closed/)
      expect(status.stdout).toMatch(/after\s+cancelled/)
      const again = writePlan(
        tempDir("plan-"),
        "again.yaml",
        "agents:\n  - id: next\n    run: echo next\n    claims: { write: [a.txt, b.txt] }\n    claimTimeout: 5s\n"
      )
      expect((await runCli(["run", again], { cwd: repo })).code, "the claims were released").toBe(0)
    })
  }

  it("a command whose reader is slow writes all its output before it exits (corral logs | (sleep 3; cat))", async () => {
    const repo = makeRepo()
    const size = 2 * 1024 * 1024
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: big\n    run: node -e "process.stdout.write('y'.repeat(${size}))"\n`
    )
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    const eager = await runCli(["logs", "big"], { cwd: repo })
    expect(eager.stdout.length).toBeGreaterThan(size)
    const child = spawn(corralBin, ["logs", "big"], { cwd: repo, stdio: ["ignore", "pipe", "ignore"] })
    const exited = new Promise((resolve) => child.on("exit", resolve))
    // Nothing is read until corral has exited or has had 3 s to: a corral that exits with output it has
    // not written yet (more than the pipe holds) loses it; one that waits for its reader stays alive.
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000))])
    let read = 0
    child.stdout.on("data", (chunk: Buffer) => (read += chunk.length))
    const code = await new Promise((resolve) => child.on("close", resolve))
    expect(code).toBe(0)
    expect(read).toBe(Buffer.byteLength(eager.stdout))
  })

  it("corral logs --follow | head across a retry: ends with head's lines, quietly, once the agent writes again", async () => {
    const repo = makeRepo()
    const marks = tempDir("marker-")
    const tried = NodePath.join(marks, "tried")
    const retry = NodePath.join(marks, "retry")
    const more = NodePath.join(marks, "more")
    const waitFile = (file: string) => `while [ ! -e ${file} ]; do sleep 0.05; done`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: flaky
    retries: 1
    run: if [ -e ${tried} ]; then echo second try; ${waitFile(more)}; for i in $(seq 1 50); do echo more $i; done; else touch ${tried}; echo first try; ${waitFile(retry)}; exit 1; fi
`
    )
    const run = startCli(["run", plan], { cwd: repo })
    const firstLog = () =>
      NodeFs.readdirSync(NodePath.join(repo, ".corral", "runs"), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .some((entry) =>
          NodeFs.readFileSync(NodePath.join(repo, ".corral", "runs", entry.name, "logs", "flaky.log"), "utf8").includes(
            "first try"
          )
        )
    await waitFor(
      () => {
        try {
          return firstLog()
        } catch {
          return false
        }
      },
      30_000,
      "the first attempt's output"
    ).catch((error) => {
      for (const gate of [retry, more]) NodeFs.writeFileSync(gate, "")
      throw error
    })
    const pipeline = spawn(
      "bash",
      ["-c", `"$0" logs flaky --follow | stdbuf -oL head -n 5; echo "logs exited \${PIPESTATUS[0]}" >&2`, corralBin],
      { cwd: repo, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    pipeline.stdout.on("data", (chunk) => (stdout += chunk))
    pipeline.stderr.on("data", (chunk) => (stderr += chunk))
    const ended = new Promise<number | null>((resolve) => pipeline.on("exit", resolve))
    const seen = (line: RegExp, what: string) =>
      waitFor(() => line.test(stdout), 30_000, what).catch((error) => {
        throw new Error(`${error}: ${JSON.stringify({ stdout, stderr })}`)
      })
    let code: number | null | string
    try {
      await seen(/^\[out\] first try$/m, "the followed output")
      NodeFs.writeFileSync(retry, "")
      await seen(/^\[out\] second try$/m, "the next attempt's first line through head")
    } finally {
      for (const gate of [retry, more]) NodeFs.writeFileSync(gate, "")
      code = await Promise.race([
        ended,
        new Promise<string>((resolve) => setTimeout(() => resolve("still running"), 30_000))
      ])
      if (code === "still running") pipeline.kill("SIGKILL")
    }
    expect(code, stderr).toBe(0)
    expect(stdout.split("\n").filter((line) => line.startsWith("[out] "))).toEqual([
      "[out] first try",
      "[out] second try"
    ])
    expect(stderr).toMatch(/logs exited (0|141)\n/)
    expect(stderr).not.toMatch(/EPIPE|\n\s+at |Error/)
    expect((await run.done).code).toBe(0)
  })

  it("read-only commands exit quietly when their reader is gone", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: one\n    run: echo hello\n")
    expect((await runCli(["run", plan], { cwd: repo })).code).toBe(0)
    for (const args of [["runs"], ["status"], ["logs", "one"]]) {
      const cli = startPiped(args, repo)
      cli.closeReader()
      const result = await cli.done
      expect([0, 141], `${args.join(" ")}: ${cli.stderr()}`).toContain(result.code)
      expect(cli.stderr()).not.toMatch(/EPIPE|\n\s+at |Error/)
    }
  })
})
