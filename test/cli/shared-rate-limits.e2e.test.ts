import { describe, expect, it } from "vitest"
import { makeRepo, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"

describe("rate limits shared between corral runs (end to end)", () => {
  it("a second run waits for the token the first run took from the same bucket", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
rateLimits: { api: { limit: 1, interval: 1h, burst: 1 } }
agents:
  - id: call
    run: "true"
    rateLimit: api
`
    )
    const first = await runCli(["run", plan], { cwd: repo })
    expect(first.code, first.stdout + first.stderr).toBe(0)
    const second = startCli(["run", "--json", plan], { cwd: repo })
    await waitFor(() => second.output().includes('"type":"WaitingForRateLimit"'), 30_000, "the second run to wait")
    const waiting = second
      .output()
      .split("\n")
      .find((line) => line.includes('"type":"WaitingForRateLimit"'))!
    expect(JSON.parse(waiting)).toMatchObject({ agentId: "call", key: "api" })
    expect(JSON.parse(waiting).ms).toBeGreaterThan(60_000)
    second.signal("SIGINT")
    const done = await second.done
    expect(done.code).toBe(130)
  })
})
