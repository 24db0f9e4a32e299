import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { makeRepo, root, runCli, writePlan } from "../helpers.ts"

/** The limits docs/limits.md lists, each with whether it says a plan file accepts it. */
const documentedLimits = (): Array<string> =>
  NodeFs.readFileSync(NodePath.join(root, "docs/limits.md"), "utf8")
    .split("\n")
    .flatMap((line) => {
      const match = /^\| `([A-Za-z]+)` \| ([^|]+) \|/.exec(line)
      if (match === null) return []
      expect(match[2]!.trim(), `docs/limits.md: plan file column of ${match[1]}`).toMatch(/^yes/)
      return [match[1]!]
    })

const sampleValue: Record<string, number> = { nice: 5, cpuPercent: 50 }

/** Runs `validate` and `run` on a bad plan: both exit 2, name the location, create nothing. */
const rejectedEverywhere = async (name: string, text: string | Uint8Array, location: RegExp) => {
  const repo = makeRepo()
  const plan = NodePath.join(repo, name)
  NodeFs.writeFileSync(plan, text)
  for (const command of ["validate", "run"]) {
    const result = await runCli([command, plan], { cwd: repo })
    expect(result.code, `${command}: ${result.stdout}${result.stderr}`).toBe(2)
    expect(result.stderr).toContain(plan)
    expect(result.stderr).toMatch(location)
    expect(result.stderr).not.toMatch(/\n\s+at /)
  }
  expect(NodeFs.existsSync(NodePath.join(repo, ".corral"))).toBe(false)
  return (await runCli(["validate", plan], { cwd: repo })).stderr
}

describe("plan files (end to end)", () => {
  it("accepts every limit docs/limits.md lists, and enforces fileSizeMb, maxProcesses and nice", async () => {
    const fields = documentedLimits()
    expect(fields).toEqual(
      expect.arrayContaining(["memoryMb", "cpuSeconds", "fileSizeMb", "maxProcesses", "nice", "maxOutputBytes"])
    )
    const repo = makeRepo()
    const limits = fields.map((field) => `${field}: ${sampleValue[field] ?? 1000}`).join(", ")
    const plan = writePlan(
      repo,
      "limits.yaml",
      `agents:
  - id: all
    run: echo ok
    limits: { ${limits} }
  - id: big-file
    run: head -c 3000000 /dev/zero > big.bin
    limits: { fileSizeMb: 1 }
  - id: niced
    run: test "$(nice)" -ge 7
    limits: { nice: 7 }
  - id: procs
    run: echo ok
    limits: { maxProcesses: 64 }
`
    )
    expect((await runCli(["validate", plan], { cwd: repo })).code).toBe(0)
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(1)
    const row = (id: string) => result.stdout.split("\n").find((line) => line.includes(` ${id} `)) ?? ""
    expect(row("all")).toMatch(/succeeded/)
    expect(row("niced")).toMatch(/succeeded/)
    expect(row("procs")).toMatch(/succeeded/)
    expect(row("big-file")).toMatch(/failed/)
    expect(result.stdout).toMatch(/big-file: process "big-file" exceeded its file size limit \(1 MB\)/)
  })

  it("rejects a nice value outside -20..19 with its location", async () => {
    const stderr = await rejectedEverywhere(
      "nice.yaml",
      "agents:\n  - id: a\n    run: echo a\n    limits: { nice: 40 }\n",
      /agents\[0\]\.limits\.nice/
    )
    expect(stderr).toMatch(/line 4/)
  })

  it("hints at quoting when a run value contains ': '", async () => {
    const stderr = await rejectedEverywhere(
      "colon.yaml",
      "agents:\n  - id: a\n    run: echo key: value\n",
      /line 3, column \d+/
    )
    expect(stderr).toMatch(/quote it/)
    expect(stderr).toMatch(/run: \|/)
  })

  it("rejects an unresolved YAML alias with its line", async () => {
    const stderr = await rejectedEverywhere(
      "alias.yaml",
      "agents:\n  - id: a\n    run: *missing\n",
      /line 3, column \d+/
    )
    expect(stderr).toMatch(/\*missing/)
  })

  it("rejects an agent id too long to be a branch, folder and log file name; the longest one allowed runs in a worktree", async () => {
    for (const length of [65, 300]) {
      const stderr = await rejectedEverywhere(
        "long.yaml",
        `agents:\n  - id: ok\n    run: echo ok\n  - id: ${"a".repeat(length)}\n    run: echo long\n`,
        /agents\[1\]\.id/
      )
      expect(stderr).toContain(`expected an id of at most 64 characters`)
    }
    const repo = makeRepo()
    const id = "b".repeat(64)
    const plan = writePlan(repo, "longest.yaml", `agents:\n  - id: ${id}\n    run: echo done > done.txt\n`)
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain(`${id}: merged`)
  })

  it("rejects a NUL character in a command or an environment value", async () => {
    const stderr = await rejectedEverywhere(
      "nul.yaml",
      'agents:\n  - id: a\n    run: "echo a\\0b"\n  - id: b\n    run: echo b\n    env: { X: "1\\0" }\n',
      /agents\[0\]\.run/
    )
    expect(stderr).toMatch(/NUL/)
    expect(stderr).toMatch(/agents\[1\]\.env\.X/)
  })

  it("rejects bytes that are not UTF-8 with their line", async () => {
    const text = Buffer.concat([
      Buffer.from("agents:\n  - id: a\n    run: echo "),
      Buffer.from([0xff, 0xfe]),
      Buffer.from("\n")
    ])
    const stderr = await rejectedEverywhere("bytes.yaml", text, /line 3/)
    expect(stderr).toMatch(/not valid UTF-8/)
  })

  it("rejects an input pattern or a command that git or sh would read as an option", async () => {
    const stderr = await rejectedEverywhere(
      "dash.yaml",
      `agents:
  - id: c
    run: echo c
    inputs: [--output=x]
  - id: d
    run: -x
`,
      /agents\[0\]\.inputs\[0\]/
    )
    expect(stderr).toMatch(/agents\[1\]\.run: a command must not start with "-"/)
    expect(stderr).toMatch(/start with "-"/)
  })
})
