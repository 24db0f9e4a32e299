import { describe, expect, it } from "vitest"
import { makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"

describe("many short agents in worktrees (end to end)", () => {
  it("an agent's release never removes the worktree another agent is creating", async () => {
    const repo = makeRepo()
    const agents = Array.from({ length: 24 }, (_, i) => `  - id: a${i}\n    run: test -e README.md\n`).join("")
    const plan = writePlan(tempDir("plan-"), "plan.yaml", `concurrency: 8\nagents:\n${agents}`)
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.stdout).not.toMatch(/does not exist|failed:/)
    expect(result.code, result.stdout).toBe(0)
  })
})
