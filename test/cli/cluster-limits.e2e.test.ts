import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { fakeTools, finishedOutcome, isAlive, jsonEvents, runCli, waitFor, writePlan } from "../helpers.ts"
import { hangingGit } from "./support/stalls.ts"
import { clusterTests } from "../support/cluster.ts"

const cluster = await clusterTests()
const { scratch, scratchRepo, runnerClone } = cluster

/** The `start`/`term` times (ms) the fake git wrote to `file`. */
const marksOf = (file: string): Record<string, number> =>
  Object.fromEntries(
    NodeFs.readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((line) => line.split(" "))
      .map(([what, ns]) => [what, Number(BigInt(ns!) / 1_000_000n)])
  )

/**
 * The agent's timeout: long enough that the runner's steps before the hanging command (fetch, worktree,
 * the command, the commit) end before it at any load (the push case missed a 1 s timeout at load ≈ 5).
 */
const TIMEOUT_MS = 5000

describe.skipIf(!cluster.available)("an agent's timeout on a cluster runner (end to end)", () => {
  it.each([
    ["the fetch of its base", "*' fetch '*", "echo work > work.txt"],
    ["the push of its branch", "*' push '*", "echo work > work.txt"]
  ])(
    "a runner's git command that hangs past the agent's timeout (%s) is stopped: 1 s to finish, SIGTERM, SIGKILL 1 s later",
    async (_, pattern, command) => {
      const url = await cluster.database()
      const repo = scratchRepo()
      const marks = scratch("corral-marks-")
      const bin = fakeTools({ git: hangingGit(pattern, marks) })
      const runner = await cluster.startRunner(url, runnerClone(repo, "slow"), {
        env: { PATH: `${bin}${NodePath.delimiter}${process.env.PATH}` }
      })
      const plan = writePlan(
        scratch("corral-plan-"),
        "plan.yaml",
        `version: 1\nagents:\n  - id: slow\n    timeout: ${TIMEOUT_MS / 1000}s\n    run: ${command}\n`
      )
      const run = await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
      expect(run.code, run.stdout + run.stderr).toBe(1)
      const events = jsonEvents(run.stdout)
      expect(finishedOutcome(events, "slow")?.type).toBe("TimedOut")
      const started = events.find((event) => event.type === "Started" && event.agentId === "slow")!.at as number
      const finished = events.find((event) => event.type === "Finished" && event.agentId === "slow")!.at as number
      const timedOut = started + TIMEOUT_MS
      const markFile = NodePath.join(marks, "git")
      expect(NodeFs.existsSync(markFile), `the hanging git (${pattern}) started before the timeout`).toBe(true)
      const times = marksOf(markFile)
      expect(times.start!, "the hanging git started before the timeout").toBeLessThan(timedOut)
      console.log(
        `${pattern}: git start ${times.start! - started} ms after Started; TERM ${times.term! - timedOut} ms after the timeout; Finished ${finished - timedOut} ms after it`
      )
      expect(times.term, "the runner's git got SIGTERM").toBeDefined()
      expect(times.term! - timedOut, "SIGTERM 1 s after the timeout").toBeGreaterThanOrEqual(900)
      expect(times.term! - timedOut, "SIGTERM not seconds after that").toBeLessThan(3000)
      const pid = Number(NodeFs.readFileSync(NodePath.join(marks, "pid"), "utf8").trim())
      await waitFor(() => !isAlive(pid), 30_000, "the runner's git to end")
      const gone = Date.now()
      console.log(
        `${pattern}: git gone ${gone - timedOut} ms after the timeout, ${gone - times.term!} ms after its SIGTERM (seen within 25 ms)`
      )
      expect(gone - times.term!, "SIGKILL 1 s after SIGTERM (killGrace), not seconds later").toBeLessThan(3000)
      runner.signal("SIGINT")
      expect((await runner.done).code).toBe(130)
    },
    120_000
  )
})
