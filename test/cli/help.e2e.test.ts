import { describe, expect, it } from "vitest"
import { runCli, tempDir } from "../helpers.ts"

/** The subcommands `corral --help` lists, read from its SUBCOMMANDS section. */
const subcommands = (help: string): Array<string> => {
  const section = help.split("SUBCOMMANDS")[1]?.split("EXAMPLES")[0] ?? ""
  return [...section.matchAll(/^ {2}(\S+) {2,}/gm)].map((match) => match[1]!)
}

describe("corral --help (end to end)", () => {
  it("every subcommand's --help has examples, as docs/cli.md says", async () => {
    const cwd = tempDir("help-")
    const top = await runCli(["--help"], { cwd })
    expect(top.code, top.stderr).toBe(0)
    const names = subcommands(top.stdout)
    expect(names).toContain("runs")
    const missing: Array<string> = []
    for (const name of names) {
      const help = await runCli([name, "--help"], { cwd })
      expect(help.code, `${name}: ${help.stderr}`).toBe(0)
      if (!help.stdout.includes("EXAMPLES")) missing.push(name)
    }
    expect(missing).toEqual([])
  })

  it("corral runner --help names the defaults of --capacity and --host", async () => {
    const help = await runCli(["runner", "--help"], { cwd: tempDir("help-") })
    expect(help.stdout).toMatch(/--capacity integer +.*\(default: 8\)/)
    expect(help.stdout).toMatch(/--host string +.*\(default: 127\.0\.0\.1\)/)
  })
})
