import { execFile } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { describe, expect, it, onTestFinished } from "vitest"
import { git, root } from "../helpers.ts"

const demos = () => NodeFs.readdirSync(NodeOs.tmpdir()).filter((name) => name.startsWith("corral-demo-"))

describe("pnpm demo", () => {
  it("runs the demo plan in a sample repository it keeps, and says where it is and how to remove it", async () => {
    const before = new Set(demos())
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) =>
      execFile(process.execPath, [NodePath.join(root, "apps/cli/src/demo.ts")], { cwd: root }, (error, out) =>
        resolve({ code: error === null ? 0 : (error.code as number), stdout: out })
      )
    )
    const made = demos().filter((name) => !before.has(name))
    expect(made).toHaveLength(1)
    const repo = NodePath.join(NodeOs.tmpdir(), made[0]!)
    onTestFinished(() => NodeFs.rmSync(repo, { recursive: true, force: true }))
    expect(code, stdout).toBe(0)
    expect(stdout).toContain(`corral demo: a sample repository at ${repo}`)
    expect(git(repo, "branch", "--show-current").trim()).toBe("main")
    expect(git(repo, "branch", "--list", "corral/*/integration").trim()).not.toBe("")
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "runs"))).toBe(true)
    const tail = stdout.trim().split("\n").slice(-2)
    expect(tail).toEqual([
      `The sample repository stays at ${repo} for you to look at (its branches, .corral/runs/);`,
      `remove it with: rm -rf ${repo}`
    ])
  }, 120_000)
})
