import { describe, expect, it } from "vitest"
import { finishedOutcome, git, integrationBranch, jsonEvents, makeRepo, planFile, runCli } from "../helpers.ts"

describe("corral run: usage, result and deps files (end to end)", () => {
  it("usage lines reach the --json Finished outcome and the summary; results flow to dependents", async () => {
    const repo = makeRepo()
    const plan = planFile(`version: 1
agents:
  - id: research
    run: |
      echo '{"inputTokens":1000,"outputTokens":200,"costUsd":0.01}' >> "$CORRAL_USAGE_FILE"
      echo 'not json' >> "$CORRAL_USAGE_FILE"
      echo '{"inputTokens":500,"outputTokens":100,"costUsd":0.005}' >> "$CORRAL_USAGE_FILE"
      echo '{"sources":12}' > "$CORRAL_RESULT_FILE"
  - id: write
    dependsOn: [research]
    run: cp "$CORRAL_DEPS_DIR/research.json" research.json && echo '"written"' > "$CORRAL_RESULT_FILE"
`)
    const json = await runCli(["run", "--json", plan], { cwd: repo })
    expect(json.code, json.stdout + json.stderr).toBe(0)
    const events = jsonEvents(json.stdout)
    expect(finishedOutcome(events, "research").usage).toEqual({ inputTokens: 1500, outputTokens: 300, costUsd: 0.015 })
    const live = events.filter((event) => event.type === "Usage" && event.agentId === "research")
    expect(live.reduce((sum, event) => sum + event.usage.costUsd, 0)).toBeCloseTo(0.015, 12)
    const notice = events.find((event) => event.type === "Notice" && String(event.message).includes("line 2"))
    expect(notice?.message).toMatch(/agent "research": .*usage\.jsonl line 2: not JSON: not json/)
    const integration = integrationBranch(repo)
    expect(JSON.parse(git(repo, "show", `${integration}:research.json`))).toEqual({ sources: 12 })

    const plain = await runCli(["run", plan], { cwd: repo })
    expect(plain.code, plain.stdout + plain.stderr).toBe(0)
    expect(plain.stdout).toMatch(/research .*\$0\.015/)
    expect(plain.stdout).toContain("cost: $0.015")
    const status = await runCli(["status"], { cwd: repo })
    expect(status.code, status.stdout + status.stderr).toBe(0)
    expect(status.stdout).toContain('result: {"sources":12}')
    expect(status.stdout).toContain('result: "written"')
  })

  it("a plan budget stops the run: the spender is stopped, its dependent cancelled, exit 1 with the reason", async () => {
    const repo = makeRepo()
    const plan = planFile(`version: 1
budget: { costUsd: 1, tokens: 100000 }
agents:
  - id: spender
    run: echo '{"inputTokens":10,"costUsd":2.5}' >> "$CORRAL_USAGE_FILE"; sleep 1000
  - id: later
    dependsOn: [spender]
    run: "true"
`)
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stdout).toMatch(/stopped: .*costUsd budget 1 exceeded by spender/)
    expect(result.stdout).toMatch(/later .*cancelled/i)
  })

  it("rejects a budget that is not positive, naming the field", async () => {
    const repo = makeRepo()
    const plan = planFile("version: 1\nbudget: { costUsd: -1 }\nagents:\n  - id: a\n    run: echo\n")
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(2)
    expect(result.stdout + result.stderr).toContain("budget.costUsd")
  })
})
