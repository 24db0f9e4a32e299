import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"

const SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZYXWVUTSRQPON"

const filesUnder = (dir: string): Array<string> =>
  NodeFs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => NodePath.join(entry.parentPath, entry.name))

describe("secrets in long output lines (end to end)", () => {
  it("no piece of a secret reaches the log, --json or the ledger, wherever the read chunks cut it", async () => {
    const repo = makeRepo()
    const script = NodePath.join(tempDir("script-"), "emit.sh")
    NodeFs.writeFileSync(
      script,
      `for o in $(seq 65480 3 65540) $(seq 131015 3 131075); do
  { head -c $o /dev/zero | tr '\\0' x; printf '%s' "$MY_TOKEN"; head -c $((196607 - o - 52)) /dev/zero | tr '\\0' y; echo; } > "$0.line"
  cat "$0.line"
done
printf 'last %s\\n' "$MY_TOKEN"
`
    )
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nagents:\n  - id: talker\n    run: sh ${script}\n    secrets: [MY_TOKEN]\n`
    )
    const result = await runCli(["run", plan, "--json"], { cwd: repo, env: { MY_TOKEN: SECRET } })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stderr).not.toMatch(/maxOutputBytes/)
    const state = NodePath.join(repo, ".corral")
    const log = filesUnder(state).find((file) => file.endsWith("talker.log"))!
    expect(NodeFs.readFileSync(log, "utf8")).toContain("***")
    const places: Array<[string, string]> = [
      ["--json", result.stdout],
      ["summary", result.stderr],
      ...filesUnder(state).map((file): [string, string] => [file, NodeFs.readFileSync(file, "latin1")])
    ]
    for (const [where, text] of places) {
      for (let i = 0; i + 6 <= SECRET.length; i++) {
        expect(text.includes(SECRET.slice(i, i + 6)), `${where} holds ${SECRET.slice(i, i + 6)}`).toBe(false)
      }
    }
  }, 60_000)
})

describe("output floods (end to end)", () => {
  it("an agent without limits is stopped at the default output cap of 64 MiB", async () => {
    const repo = makeRepo()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "version: 1\nagents:\n  - id: flood\n    run: head -c 100000000 /dev/zero | tr '\\0' x | fold -w 1000\n"
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code).toBe(1)
    expect(result.stdout).toMatch(/exceeded its output limit \(67108864 bytes\)/)
    const logs = filesUnder(NodePath.join(repo, ".corral")).filter((file) => file.endsWith("flood.log"))
    expect(logs).toHaveLength(1)
    const size = NodeFs.statSync(logs[0]!).size
    expect(size).toBeGreaterThan(60 * 1024 * 1024)
    expect(size).toBeLessThan(64 * 1024 * 1024 + 1024 * 1024)
  }, 120_000)

  it("corral's memory (and its spawn helper's) does not grow with the size of a flood", async () => {
    const repo = makeRepo()
    const side = tempDir("side-")
    // The agent's parent is corral, or the spawn helper (`node -e …`) that corral started it through.
    const recordPeaks = (id: string) =>
      `p=$PPID; case "$(tr '\\0' ' ' < /proc/$p/cmdline)" in *" -e "*) awk '/VmHWM/ { print $2 }' /proc/$p/status > ${side}/${id}.helper; p=$(awk '/^PPid/ { print $2 }' /proc/$p/status);; esac; awk '/VmHWM/ { print $2 }' /proc/$p/status > ${side}/${id}`
    const flood = (id: string, bytes: number, lineWidth: number | undefined) => `  - id: ${id}
    run: head -c ${bytes} /dev/zero | tr '\\0' x ${lineWidth === undefined ? "" : `| fold -w ${lineWidth}`} && ${recordPeaks(id)}
    limits: { maxOutputBytes: 400000000 }
`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nconcurrency: 1\nagents:\n${flood("small", 30_000_000, 200)}${flood("big", 300_000_000, 200)}    dependsOn: [small]\n${flood("line", 200_000_000, undefined)}    dependsOn: [big]\n`
    )
    const result = await runCli(["run", plan, "--json"], { cwd: repo })
    expect(result.code, result.stderr).toBe(0)
    const peakKb = (id: string) => Number(NodeFs.readFileSync(NodePath.join(side, id), "utf8"))
    // Holding on to the 270 MB more of output (or its events) would raise the peak by more than that;
    // the margin is for garbage the collector has not reclaimed yet on a loaded machine.
    const peaks = `peak RSS (KiB) after 30 MB: ${peakKb("small")}, 300 MB: ${peakKb("big")}, 200 MB line: ${peakKb("line")}`
    expect(peakKb("big") - peakKb("small"), peaks).toBeLessThan(180 * 1024)
    expect(peakKb("line") - peakKb("small"), peaks).toBeLessThan(180 * 1024)
    expect(Buffer.byteLength(result.stdout)).toBeLessThan(20 * 1024 * 1024)
    const helperPeakKb = (id: string) => {
      const file = NodePath.join(side, `${id}.helper`)
      return NodeFs.existsSync(file) ? Number(NodeFs.readFileSync(file, "utf8")) : undefined
    }
    const [small, big, line] = [helperPeakKb("small"), helperPeakKb("big"), helperPeakKb("line")]
    const helperPeaks = `helper peak RSS (KiB) after 30 MB: ${small}, 300 MB: ${big}, 200 MB line: ${line}`
    if (small !== undefined && big !== undefined) expect(big - small, helperPeaks).toBeLessThan(180 * 1024)
    if (small !== undefined && line !== undefined) expect(line - small, helperPeaks).toBeLessThan(180 * 1024)
  }, 180_000)
})
