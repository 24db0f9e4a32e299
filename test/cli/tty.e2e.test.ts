import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { width } from "../../apps/cli/src/TerminalText.ts"
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
    // alpha and gamma run until the test has seen them running (and beta waiting), however slow the screen
    const gate = NodePath.join(tempDir("gate-"), "open")
    const held = `while [ ! -e ${gate} ]; do sleep 0.05; done`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 2
agents:
  - id: alpha
    run: echo "alpha working" && ${held} && echo done > alpha.txt
    claims: { write: [shared.md] }
  - id: beta
    run: echo "beta working" && echo done > beta.txt
    claims: { write: [shared.md] }
  - id: gamma
    run: echo "gamma working" && ${held} && echo done > gamma.txt
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
      await waitFor(
        () => /▶ alpha\s+running/.test(screen()) && /gamma\s+running/.test(screen()),
        20_000,
        "alpha and gamma running"
      )
      const early = screen()
      expect(early).toMatch(/beta\s+waiting\s+.*shared\.md \(write, held by alpha\)/)
      expect(early).toMatch(/gamma\s+running/)
      expect(early).toMatch(/\d+ running · \d+ waiting/)
      NodeFs.writeFileSync(gate, "")
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

  it("strips agents' control sequences, keeps wide characters aligned and shows a failed agent's reason", async () => {
    const repo = makeRepo()
    const gate = NodePath.join(tempDir("gate-"), "go")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 3
agents:
  - id: noisy
    run: printf '\\033[2J\\033]0;HIJACKED\\007\\033[31mred 漢字漢字 end\\033[0m\\n'; while [ ! -e ${gate} ]; do sleep 0.05; done
  - id: broken
    run: echo "the last line before failing"; exit 7
  - id: wide
    run: echo "ｗｉｄｅ ｔｅｘｔ"; while [ ! -e ${gate} ]; do sleep 0.05; done
`
    )
    const session = `corral-tty2-${process.pid}-${Date.now()}`
    tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "30", `cd ${repo} && ${corralBin} run ${plan}; sleep 30`)
    const screen = () => tmux("capture-pane", "-p", "-t", session)
    try {
      await waitFor(
        () =>
          /▶ noisy .*red 漢字漢字 end/.test(screen()) &&
          /✗ broken/.test(screen()) &&
          /▶ wide .*ｗｉｄｅ/.test(screen()),
        20_000,
        "rows"
      )
      const shown = screen()
      expect(tmux("display-message", "-p", "-t", session, "#{pane_title}")).not.toContain("HIJACKED")
      expect(shown).toMatch(/✗ broken\s+failed\s+\S+\s+.*exited with code 7/)
      expect(shown).not.toMatch(/✗ broken.*the last line before failing/)
      for (const line of shown.split("\n")) expect(width(line), line).toBeLessThanOrEqual(80)
      const noisy = shown.split("\n").find((line) => line.includes("noisy"))!
      const wide = shown.split("\n").find((line) => line.includes("▶ wide"))!
      expect(width(noisy.slice(0, noisy.indexOf("red"))), shown).toBe(width(wide.slice(0, wide.indexOf("ｗｉｄｅ"))))
      NodeFs.writeFileSync(gate, "")
      await waitFor(() => /run \S+: 2 succeeded, 1 failed/.test(screen()), 30_000, "the summary")
    } finally {
      tmux("kill-session", "-t", session)
    }
  })
})

describe("corral run on a terminal that reports 0x0 (script)", () => {
  const hasScript = (() => {
    try {
      execFileSync("script", ["--version"])
      return true
    } catch {
      return false
    }
  })()
  it.skipIf(!hasScript)("falls back to plain lines", async () => {
    const repo = makeRepo()
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: zero\n    run: echo hi\n")
    const out = execFileSync("script", ["-qec", `stty rows 0 cols 0; ${corralBin} run ${plan}`, "/dev/null"], {
      cwd: repo,
      encoding: "utf8"
    })
    expect(out).toMatch(/\[\s*\d+\.\ds\] zero: started/)
    expect(out).toMatch(/\[\s*\d+\.\ds\] zero: succeeded/)
    expect(out).toMatch(/run \S+: 1 succeeded/)
  })
})
