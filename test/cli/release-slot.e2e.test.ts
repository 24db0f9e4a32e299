import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { git, integrationBranch, jsonEvents, makeRepo, runCli, tempDir, worktrees, writePlan } from "../helpers.ts"

/**
 * With concurrency 1, an agent gives its slot back when its command ends: the next agent's command
 * runs while the first agent's work is still being merged. Ordered without timing: corral holds
 * agent `a` after its commit, before its merge, until agent `b`'s command has written a marker file
 * (`CORRAL_TEST_WAIT_AT`), so if `b` could not start before `a` ended, `a`'s merge would wait out the
 * hook's 60 s and land first.
 */
describe("the concurrency slot is released when the agent's command ends (end to end)", () => {
  it("with concurrency 1, b's command starts before a's merge; a writer of a's file waits for a's merge", async () => {
    const repo = makeRepo()
    const marks = tempDir("slot-marks-")
    const marker = NodePath.join(marks, "b-started")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 1
agents:
  - id: a
    run: echo a > a.txt
    claims: { write: [a.txt] }
  - id: b
    run: touch ${marker} && echo b > b.txt
    claims: { write: [b.txt] }
  - id: c
    run: cat a.txt > c.txt
    claims: { write: [a.txt, c.txt] }
`
    )
    const result = await runCli(["run", plan, "--json"], {
      cwd: repo,
      env: { CORRAL_TEST_WAIT_AT: `merging:a:${marker}` }
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const events = jsonEvents(result.stdout)
    const index = (type: string, agentId: string) => {
      const at = events.findIndex((event) => event.type === type && event.agentId === agentId)
      expect(at, `${type} of ${agentId}`).toBeGreaterThanOrEqual(0)
      return at
    }
    expect(index("Started", "b")).toBeLessThan(index("Merged", "a"))
    expect(index("SlotReleased", "a")).toBeLessThan(index("Started", "b"))
    expect(index("Merged", "a")).toBeLessThan(index("Finished", "a"))
    expect(index("Finished", "a")).toBeLessThan(index("Started", "c"))
    const branch = integrationBranch(repo)
    expect(git(repo, "show", `${branch}:c.txt`)).toBe("a\n")
    expect(git(repo, "show", `${branch}:b.txt`)).toBe("b\n")
    expect(worktrees(repo)).toHaveLength(1)
    expect(NodeFs.existsSync(NodePath.join(repo, "a.txt"))).toBe(false)
  }, 120_000)
})
