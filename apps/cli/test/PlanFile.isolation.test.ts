import { readFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { LimitsSchema } from "../src/internal/planFileSchema.ts"
import * as PlanFile from "../src/PlanFile.ts"

const decodeYaml = (text: string) => PlanFile.decode(text, { path: "plan.yaml" })

const issueAt = (error: PlanFile.PlanFileError, path: string): PlanFile.PlanFileIssue => {
  const issue = error.issues.find((i) => i.path === path)
  assert.isDefined(issue, `no issue at ${path}; got ${error.message}`)
  return issue!
}

describe("PlanFile: sandbox, database and isolation limits", () => {
  it.effect("a sandbox under defaults applies to every agent unless the agent sets its own", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(`defaults:
  sandbox: { network: false, allow: { read: [docs], write: [/tmp/out] } }
  database: per-agent
agents:
  - { id: a, run: echo a }
  - { id: b, run: echo b, sandbox: true, database: shared }
  - { id: c, run: echo c, sandbox: false }
`)
      const [a, b, c] = plan.agents
      expect(a!.sandbox).toEqual({ network: false, allow: { read: ["docs"], write: ["/tmp/out"], ports: [] } })
      expect(a!.database).toBe("per-agent")
      expect(b!.sandbox).toEqual({ network: true, allow: { read: [], write: [], ports: [] } })
      expect(b!.database).toBe("shared")
      expect(c!.sandbox).toBeUndefined()
    })
  )

  it.effect("network: loopback with ports", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml(
        "agents:\n  - { id: a, run: echo a, sandbox: { network: loopback, allow: { ports: [5432, 5432, 6379] } } }\n"
      )
      expect(plan.agents[0]!.sandbox).toEqual({
        network: "loopback",
        allow: { read: [], write: [], ports: [5432, 6379] }
      })
    })
  )

  it.effect("no sandbox and a shared database by default; cpuPercent and diskMb decode", () =>
    Effect.gen(function* () {
      const plan = yield* decodeYaml("agents:\n  - { id: a, run: echo a, limits: { cpuPercent: 25, diskMb: 50 } }\n")
      expect(plan.agents[0]).toMatchObject({
        sandbox: undefined,
        database: "shared",
        limits: { cpuPercent: 25, diskMb: 50 }
      })
    })
  )

  it.effect("bad values name the field", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        decodeYaml(`agents:
  - { id: a, run: echo a, limits: { cpuPercent: 0, diskMb: 0 } }
  - { id: b, run: echo b, limits: { cpuPercent: 101 }, database: private }
  - { id: c, run: echo c, sandbox: { network: local, mounts: [] } }
  - { id: d, run: echo d, sandbox: { network: true, allow: { ports: [5432] } } }
  - { id: e, run: echo e, sandbox: { network: loopback, allow: { ports: [0] } } }
`)
      )
      assert.include(issueAt(error, "agents[0].limits.cpuPercent").message, "between 1 and 100")
      assert.include(issueAt(error, "agents[0].limits.diskMb").message, "greater than or equal to 1")
      assert.include(issueAt(error, "agents[1].limits.cpuPercent").message, "between 1 and 100")
      assert.include(issueAt(error, "agents[1].database").message, '"shared" | "per-agent"')
      assert.isDefined(error.issues.find((issue) => issue.path.startsWith("agents[2].sandbox")))
      assert.include(issueAt(error, "agents[3].sandbox.allow.ports").message, "network: loopback")
      assert.include(issueAt(error, "agents[4].sandbox.allow.ports[0]").message, "between 1 and 65535")
    })
  )

  it("the plan schema accepts exactly the limits docs/limits.md lists for plan files", () => {
    const doc = readFileSync(join(import.meta.dirname, "../../../docs/limits.md"), "utf8")
    const rows = doc
      .split("\n")
      .filter((line) => line.startsWith("| `"))
      .map((line) => line.split("|").map((cell) => cell.trim()))
    const inPlanFiles = rows.filter((cells) => cells[2] === "yes").map((cells) => cells[1]!.replaceAll("`", ""))
    expect(new Set(inPlanFiles)).toEqual(new Set(Object.keys(LimitsSchema.fields)))
  })
})
