import { execFileSync } from "node:child_process"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { corralBin, makeRepo, tempDir, waitFor, writePlan } from "../helpers.ts"

const hasTmux = (() => {
  try {
    execFileSync("tmux", ["-V"])
    return true
  } catch {
    return false
  }
})()

const tmux = (...args: Array<string>) => execFileSync("tmux", args, { encoding: "utf8" })

describe.skipIf(!hasTmux)("corral run on a terminal (tmux)", () => {
  it("shows one live row per agent that updates, then the summary", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 2
agents:
  - id: alpha
    run: echo "alpha working" && sleep 2 && echo done > alpha.txt
    claims: { write: [shared.md] }
  - id: beta
    run: echo "beta working" && sleep 2 && echo done > beta.txt
    claims: { write: [shared.md] }
  - id: gamma
    run: echo "gamma working" && sleep 1 && echo done > gamma.txt
`
    )
    const session = `corral-tty-${process.pid}-${Date.now()}`
    const exitFile = NodePath.join(tempDir("tty-"), "exit")
    tmux(
      "new-session",
      "-d",
      "-s",
      session,
      "-x",
      "120",
      "-y",
      "40",
      `cd ${repo} && ${corralBin} run ${plan}; echo $? > ${exitFile}; sleep 30`
    )
    const screen = () => tmux("capture-pane", "-p", "-t", session)
    try {
      await waitFor(() => /▶ alpha\s+running/.test(screen()), 20_000, "alpha running")
      const early = screen()
      expect(early).toMatch(/beta\s+waiting\s+.*shared\.md \(write, held by alpha\)/)
      expect(early).toMatch(/gamma\s+running/)
      expect(early).toMatch(/\d+ running · \d+ waiting/)
      await waitFor(() => /run \S+: 3 succeeded/.test(screen()), 30_000, "the summary")
      const final = screen()
      expect(final).toMatch(/✓ alpha\s+succeeded/)
      expect(final).toMatch(/✓ beta\s+succeeded/)
      expect(final).toMatch(/│ gamma\s+│ succeeded/)
      await waitFor(
        () => {
          try {
            return execFileSync("cat", [exitFile], { encoding: "utf8" }).trim() === "0"
          } catch {
            return false
          }
        },
        10_000,
        "exit code 0"
      )
    } finally {
      tmux("kill-session", "-t", session)
    }
  })
})
