import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { makeGitShim, readGitLog } from "../src/lib/gitCpu.ts"

const hasCc = spawnSync("sh", ["-c", "command -v cc"]).status === 0
const needsCc = hasCc || process.env.CI === "true" ? it : it.skip

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

describe("git shim", () => {
  needsCc("logs every git command's CPU and arguments and passes its output and exit code through", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-git-shim-"))
    dirs.push(dir)
    const shim = makeGitShim(dir)
    expect(shim).toBeDefined()
    const log = path.join(dir, "git.log")
    const env = { ...process.env, ...shim!.env(log) }
    const repo = path.join(dir, "repo")
    execFileSync("git", ["init", "--quiet", repo], { env })
    const gitDir = execFileSync("git", ["-c", "core.abbrev=12", "-C", repo, "rev-parse", "--git-dir"], {
      env,
      encoding: "utf8"
    })
    expect(gitDir.trim()).toBe(".git")
    const failed = spawnSync("git", ["-C", repo, "rev-parse", "--verify", "--quiet", "no-such-ref"], { env })
    expect(failed.status).toBe(1)
    const commands = readGitLog(log)
    expect(commands.map((c) => c.subcommand)).toEqual(["init", "rev-parse", "rev-parse"])
    // the shim logs at most 40 characters of each argument
    expect(commands[1]!.args).toBe(`-C ${repo.slice(0, 40)} rev-parse --git-dir`)
    for (const command of commands) {
      expect(command.cpuMs).toBeGreaterThan(0)
      expect(command.wallMs).toBeGreaterThanOrEqual(command.cpuMs / os.availableParallelism())
    }
  })
})
