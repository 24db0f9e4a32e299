import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { makeRepo, startCli, tempDir, writePlan } from "../helpers.ts"

describe("two corral runs on one repository (end to end)", () => {
  it("never hold overlapping write claims at the same time, and both finish", async () => {
    const repo = makeRepo()
    const log = NodePath.join(tempDir("spans-"), "spans.txt")
    const planFor = (name: string) =>
      writePlan(
        tempDir("plan-"),
        `${name}.yaml`,
        `version: 1
concurrency: 3
isolation: none
merge: none
agents:
${[0, 1, 2]
  .map(
    (i) => `  - id: ${name}-${i}
    run: >-
      echo "start $CORRAL_RUN_ID $CORRAL_AGENT_ID $(date +%s%N) $CORRAL_FENCING_TOKEN" >> ${log} && sleep 0.4 &&
      echo "end $CORRAL_RUN_ID $CORRAL_AGENT_ID $(date +%s%N)" >> ${log}
    claims: { write: [${i === 2 ? "src/" : `src/file-${i}.ts`}] }
`
  )
  .join("")}`
      )
    const one = startCli(["run", planFor("one")], { cwd: repo })
    const two = startCli(["run", planFor("two")], { cwd: repo })
    const [a, b] = await Promise.all([one.done, two.done])
    expect(a.code, a.stdout + a.stderr).toBe(0)
    expect(b.code, b.stdout + b.stderr).toBe(0)
    const spans = new Map<string, { start: number; end: number; key: string; token: number }>()
    for (const line of NodeFs.readFileSync(log, "utf8").trim().split("\n")) {
      const [kind, runId, agentId, ns, token] = line.split(" ")
      const id = `${runId}/${agentId}`
      const index = Number(agentId!.split("-")[1])
      const span = spans.get(id) ?? { start: 0, end: 0, key: index === 2 ? "src/" : `src/file-${index}.ts`, token: 0 }
      if (kind === "start") {
        span.start = Number(BigInt(ns!) / 1000n)
        span.token = Number(token)
      } else span.end = Number(BigInt(ns!) / 1000n)
      spans.set(id, span)
    }
    const logText = NodeFs.readFileSync(log, "utf8")
    expect(spans.size, logText).toBe(6)
    const list = [...spans.entries()]
    const conflicting = (x: string, y: string) => x === "src/" || y === "src/" || x === y
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const [idA, sa] = list[i]!
        const [idB, sb] = list[j]!
        if (!conflicting(sa.key, sb.key)) continue
        const overlap = sa.start < sb.end && sb.start < sa.end
        expect(overlap, `${idA} and ${idB} held ${sa.key}/${sb.key} at the same time\n${logText}`).toBe(false)
      }
    }
    expect(new Set(list.map(([, s]) => s.token)).size, logText).toBe(6)
  })
})
