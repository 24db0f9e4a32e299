import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { root, runCli, tempDir, writePlan } from "../helpers.ts"

describe("corral validate (end to end)", () => {
  it("prints the order, the critical path, the parallelism and the claim conflicts of a known plan", async () => {
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1
concurrency: 2
agents:
  - id: fetch
    run: echo fetch
    estimate: 2s
  - id: parse
    run: echo parse
    dependsOn: [fetch]
    estimate: 3s
    claims: { write: [data/parsed.json] }
  - id: lint
    run: echo lint
    estimate: 1s
    claims: { read: [data/] }
  - id: report
    run: echo report
    dependsOn: [parse, lint]
    estimate: 1s
`
    )
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code).toBe(0)
    const lines = result.stdout.trim().split("\n")
    expect(lines.slice(0, -1)).toEqual([
      `${plan}: valid — 4 agents, concurrency 2, mode settle, isolation worktree`,
      "order: fetch, parse, lint, report",
      "critical path: fetch -> parse -> report (6s estimated)",
      "peak of the estimated schedule: 2 agents at once (each starts as its dependencies end and runs for its estimate, 1ms without one; concurrency ignored)",
      "serialized by claims: parse and lint (data/parsed.json)"
    ])
    expect(lines.at(-1)).toMatch(/^sandbox: (available|not available) \(/)
  })

  it("without estimates, gives the peak of the schedule where every agent takes the same time, not every agent that could overlap", async () => {
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: a
    run: echo a
  - id: b
    run: echo b
    dependsOn: [a]
  - id: c
    run: echo c
    dependsOn: [a]
  - id: d
    run: echo d
`
    )
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(
      "\npeak of the schedule if every agent took the same time: 2 agents at once (each starts as its dependencies end; concurrency ignored)\n"
    )
  })

  it("counts one agent in the singular", async () => {
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: only\n    run: echo only\n")
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(`${plan}: valid — 1 agent, concurrency`)
  })

  it("says what the parallelism figure assumes: equal times without estimates, 1 ms for an agent without one", async () => {
    const agents = (estimate: string) =>
      `agents:\n  - id: a\n    run: echo a\n  - id: b\n    run: echo b\n    dependsOn: [a]\n  - id: c\n    run: echo c\n    dependsOn: [a]\n  - id: d\n    run: echo d\n${estimate}`
    const none = await runCli(["validate", writePlan(tempDir("plan-"), "plan.yaml", agents(""))], { cwd: root })
    expect(none.code, none.stderr).toBe(0)
    expect(none.stdout).toContain(
      "\npeak of the schedule if every agent took the same time: 2 agents at once (each starts as its dependencies end; concurrency ignored)\n"
    )
    const some = await runCli(["validate", writePlan(tempDir("plan-"), "plan.yaml", agents("    estimate: 5s\n"))], {
      cwd: root
    })
    expect(some.code, some.stderr).toBe(0)
    expect(some.stdout).toContain(
      "\npeak of the estimated schedule: 3 agents at once (each starts as its dependencies end and runs for its estimate, 1ms without one; concurrency ignored)\n"
    )
  })

  it("a folder named like a resource is a path written ./a:b/, serializing the agents under it; a:b/ exits 2", async () => {
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: folder
    run: echo folder
    claims: { write: ["./a:b/"] }
  - id: file
    run: echo file
    claims: { write: ["./a:b/c.txt"] }
  - id: other
    run: echo other
    claims: { write: ["./a:bc/"] }
`
    )
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain("serialized by claims: folder and file (a:b/c.txt)")
    expect(result.stdout).toContain("order: folder, file, other")
    expect(result.stdout).not.toMatch(/serialized by claims: .*other/)
    const ambiguous = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      'agents:\n  - id: folder\n    run: echo folder\n    claims: { write: ["a:b/"] }\n'
    )
    const refused = await runCli(["validate", ambiguous], { cwd: root })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(
      `agents[0].claims.write[0]: expected a relative path or a named resource like "db:users", got "a:b/"; it is ambiguous`
    )
    expect(refused.stderr).toContain('write "./a:b/" for the path')
  })

  it('a file named db: is claimed as ./db:, conflicting with ./db:; "db: x" exits 2 naming both spellings', async () => {
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: writer
    run: echo writer
    claims: { write: ["./db:"] }
  - id: reader
    run: echo reader
    claims: { read: ["./db:"] }
  - id: resource
    run: echo resource
    claims: { write: ["db:x"] }
`
    )
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain("serialized by claims: writer and reader (db:)")
    expect(result.stdout).not.toMatch(/serialized by claims: .*resource/)
    const spaced = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      'agents:\n  - id: spaced\n    run: echo spaced\n    claims: { write: ["db: x"] }\n'
    )
    const refused = await runCli(["validate", spaced], { cwd: root })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(
      `agents[0].claims.write[0]: expected a relative path or a named resource like "db:users", got "db: x"; a named resource has no space after ":", so write "db:x" for the resource, or "./db: x" for the path`
    )
  })

  it("exits 2 and names the file and the cycle for an invalid plan", async () => {
    const plan = writePlan(
      tempDir("plan-"),
      "cycle.json",
      JSON.stringify({
        version: 1,
        agents: [
          { id: "a", run: "x", dependsOn: ["b"] },
          { id: "b", run: "y", dependsOn: ["a"] }
        ]
      })
    )
    const result = await runCli(["validate", plan], { cwd: root })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(plan)
    expect(result.stderr).toMatch(/a -> b -> a/)
  })

  it("exits 2 naming the plan file, the agent, the label and the reason for a required label no runner can have, as run --cluster does", async () => {
    const dir = tempDir("plan-")
    const cases = [
      ["gpu#1", 'a label must not contain "#", "~" or ",", got "gpu#1"'],
      ["a,b", 'a label must not contain "#", "~" or ",", got "a,b"'],
      [" gpu", 'a label must not begin or end with a space, got " gpu"']
    ] as const
    for (const [label, reason] of cases) {
      const plan = writePlan(
        dir,
        "labels.yaml",
        `version: 1\nagents:\n  - id: a\n    run: echo a\n    labels:\n      requires: gpu\n  - id: trains\n    run: echo b\n    labels:\n      requires: ${JSON.stringify(label)}\n`
      )
      const result = await runCli(["validate", plan], { cwd: root })
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr).toBe(
        `corral: ${plan}: agent trains requires the label ${JSON.stringify(label)}, which no runner can have: ${reason}\n`
      )
      expect(result.stdout).toBe("")
    }
  })

  it("every shipped example plan is valid", async () => {
    for (const name of ["independent", "claims", "pipeline", "fan-out-fan-in", "llm-rate-limited", "demo"]) {
      const result = await runCli(["validate", NodePath.join(root, "apps/cli/examples", `${name}.yaml`)], { cwd: root })
      expect(result.code, `${name}: ${result.stderr}`).toBe(0)
    }
  })
})
