import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { branches, makeRepo, planFile, runCli, tempDir } from "../helpers.ts"

const plan = () => planFile("agents:\n  - id: one\n    run: echo one > one.txt\n")

/** A ledger.db of each kind of damage: random bytes, and a real ledger cut short. */
const damagedLedgers = async (): Promise<Array<[string, Buffer]>> => {
  const random = Buffer.alloc(8192)
  for (let i = 0; i < random.length; i++) random[i] = (i * 7919 + 13) % 251
  const repo = makeRepo()
  const made = await runCli(["run", plan()], { cwd: repo })
  expect(made.code, made.stderr).toBe(0)
  const whole = NodeFs.readFileSync(NodePath.join(repo, ".corral", "ledger.db"))
  return [
    ["random bytes", random],
    ["truncated", whole.subarray(0, 6000)]
  ]
}

describe("the state folder and its ledger (end to end)", () => {
  it("a damaged ledger.db is exit 2 naming the file and what to do, and is left byte for byte", async () => {
    for (const [kind, bytes] of await damagedLedgers()) {
      const repo = makeRepo()
      const state = NodePath.join(repo, ".corral")
      NodeFs.mkdirSync(state)
      const file = NodePath.join(state, "ledger.db")
      NodeFs.writeFileSync(file, bytes)
      for (const args of [["run", plan()], ["runs"], ["status"]]) {
        const result = await runCli(args, { cwd: repo })
        expect(result.code, `${kind}: corral ${args[0]}: ${result.stderr}`).toBe(2)
        expect(result.stderr).toContain(file)
        expect(result.stderr).toContain("--state-dir")
        expect(result.stderr).not.toMatch(/\n\s+at /)
        expect(NodeFs.readFileSync(file).equals(bytes), `${kind}: ledger.db unchanged by ${args[0]}`).toBe(true)
      }
      expect(branches(repo), `${kind}: no run started`).toEqual(["main"])
    }
  })

  it("a state folder where folders cannot be created is exit 2 at once, naming it", async () => {
    const repo = makeRepo()
    const file = NodePath.join(tempDir("state-"), "a-file")
    NodeFs.writeFileSync(file, "")
    for (const stateDir of ["/proc/self/corral-state", "/proc/self/corral/state", NodePath.join(file, "sub")]) {
      const result = await runCli(["run", plan(), "--state-dir", stateDir], { cwd: repo })
      expect(result.code, `${stateDir}: ${result.stderr}`).toBe(2)
      expect(result.stderr).toContain(`cannot create the state folder ${stateDir}`)
      expect(result.stderr).not.toMatch(/\n\s+at /)
    }
  }, 60_000)
})
