import { execFileSync, spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

const here = NodePath.dirname(new URL(import.meta.url).pathname)
const plan = NodePath.join(here, "..", "examples", "demo.yaml")
const bin = NodePath.join(here, "bin.ts")

const repo = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-demo-"))
const git = (...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=corral demo", "-c", "user.email=demo@localhost", ...args], {
    cwd: repo,
    encoding: "utf8"
  })
const write = (file: string, text: string) => {
  NodeFs.mkdirSync(NodePath.dirname(NodePath.join(repo, file)), { recursive: true })
  NodeFs.writeFileSync(NodePath.join(repo, file), text)
}

git("init", "-q", "-b", "main")
write("README.md", "# sample project\n")
write("CHANGELOG.md", "# Changelog\n")
write("config.json", '{\n  "workers": 2\n}\n')
write("docs/.keep", "")
write("data/.keep", "")
git("add", "-A")
git("commit", "-q", "-m", "sample project")

console.log(`corral demo: a sample repository at ${repo}\n$ corral run examples/demo.yaml\n`)
const result = spawnSync(process.execPath, [bin, "run", plan, "--repo", repo], { stdio: "inherit" })
const branch = git("branch", "--list", "corral/*/integration")
  .trim()
  .replace(/^\*?\s*/, "")
console.log(`\n$ git log --oneline ${branch}`)
console.log(git("log", "--oneline", branch).trim())
console.log(`\n$ git show ${branch}:CHANGELOG.md`)
console.log(git("show", `${branch}:CHANGELOG.md`).trim())
console.log(`\nThe run exited with ${result.status} (1: some agents failed, as this demo intends).`)
console.log(
  `Your checkout is untouched: ${git("status", "--porcelain").trim() === "" ? "clean" : "CHANGED"}, still on ${git("branch", "--show-current").trim()}.`
)
console.log(`\nThe sample repository stays at ${repo} for you to look at (its branches, .corral/runs/);`)
console.log(`remove it with: rm -rf ${repo}`)
process.exit(result.status === 1 ? 0 : 1)
