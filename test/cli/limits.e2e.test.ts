import { describe, expect, it } from "vitest"
import { makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"

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
