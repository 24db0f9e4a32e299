import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { git, makeRepo, planFile, runCli, startCli, tempDir, waitFor, writePlan } from "../helpers.ts"

const repoWithFolders = () =>
  makeRepo({ "README.md": "# test\n", "a/keep.txt": "a\n", "b/keep.txt": "b\n", "c/d/keep.txt": "d\n" })

const runIdOf = (stdout: string) => /run (\d{8}-\d{6}-[a-z0-9]+)/.exec(stdout)?.[1]

describe("corral from a subfolder of the repository (end to end)", () => {
  it("keeps its state at the repository's top: runs, status and logs from the top and from another subfolder see the run", async () => {
    const repo = repoWithFolders()
    const plan = planFile("agents:\n  - id: one\n    run: echo one > one.txt && echo said-one\n")
    const made = await runCli(["run", plan], { cwd: NodePath.join(repo, "a") })
    expect(made.code, made.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(repo, "a", ".corral")), "no state folder in the subfolder").toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "ledger.db"))).toBe(true)
    expect(git(repo, "status", "--porcelain"), "the state folder is ignored").toBe("")
    const fromTop = await runCli(["runs"], { cwd: repo })
    expect(fromTop.code, fromTop.stderr).toBe(0)
    const runId = runIdOf(fromTop.stdout) ?? /\d{8}-\d{6}-[a-z0-9]+/.exec(fromTop.stdout)?.[0]
    expect(runId, fromTop.stdout).toBeDefined()
    const fromOther = await runCli(["runs"], { cwd: NodePath.join(repo, "c", "d") })
    expect(fromOther.code, fromOther.stderr).toBe(0)
    expect(fromOther.stdout).toContain(runId!)
    const status = await runCli(["status"], { cwd: NodePath.join(repo, "b") })
    expect(status.code, status.stderr).toBe(0)
    expect(status.stdout).toContain(runId!)
    const logs = await runCli(["logs", "one"], { cwd: NodePath.join(repo, "c") })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stdout).toContain("said-one")
  })

  it("--repo naming a subfolder keeps the state at the repository's top too; --state-dir and CORRAL_HOME still win", async () => {
    const repo = repoWithFolders()
    const plan = planFile("agents:\n  - id: one\n    run: echo one > one.txt\n")
    const elsewhere = tempDir("elsewhere-")
    const made = await runCli(["run", plan, "--repo", NodePath.join(repo, "c", "d")], { cwd: elsewhere })
    expect(made.code, made.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(repo, "c", "d", ".corral"))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(elsewhere, ".corral"))).toBe(false)
    const listed = await runCli(["runs"], { cwd: repo })
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/\d{8}-\d{6}-[a-z0-9]+/)
    const home = NodePath.join(tempDir("home-"), "state")
    const withHome = await runCli(["run", plan], { cwd: NodePath.join(repo, "a"), env: { CORRAL_HOME: home } })
    expect(withHome.code, withHome.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(home, "ledger.db"))).toBe(true)
    const given = NodePath.join(tempDir("given-"), "state")
    const withFlag = await runCli(["run", plan, "--state-dir", given], { cwd: NodePath.join(repo, "a") })
    expect(withFlag.code, withFlag.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(given, "ledger.db"))).toBe(true)
  })

  it("two runs from two subfolders claiming one file exclude each other", async () => {
    const repo = repoWithFolders()
    const marks = tempDir("marks-")
    const planFor = (name: string, run: string) =>
      writePlan(
        tempDir("plan-"),
        `${name}.yaml`,
        `isolation: none
merge: none
agents:
  - id: ${name}
    run: ${run}
    claims: { write: [shared/log.txt] }
`
      )
    const holding = planFor(
      "first",
      `touch ${marks}/first-started; while [ ! -f ${marks}/release ]; do sleep 0.05; done; echo first >> ${marks}/order`
    )
    const waiting = planFor("second", `echo second >> ${marks}/order`)
    const first = startCli(["run", holding, "--json"], { cwd: NodePath.join(repo, "a") })
    await waitFor(() => NodeFs.existsSync(NodePath.join(marks, "first-started")), 30_000, "the first run's agent")
    const second = startCli(["run", waiting, "--json"], { cwd: NodePath.join(repo, "b") })
    await waitFor(
      () => /"WaitingForClaims"|"Started"/.test(second.output()) || NodeFs.existsSync(NodePath.join(marks, "order")),
      30_000,
      "the second run to wait or start"
    )
    NodeFs.writeFileSync(NodePath.join(marks, "release"), "")
    const [a, b] = await Promise.all([first.done, second.done])
    expect(a.code, a.stdout + a.stderr).toBe(0)
    expect(b.code, b.stdout + b.stderr).toBe(0)
    expect(b.stdout).toContain('"WaitingForClaims"')
    expect(NodeFs.readFileSync(NodePath.join(marks, "order"), "utf8")).toBe("first\nsecond\n")
  })
})
