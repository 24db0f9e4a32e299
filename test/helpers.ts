import { execFileSync, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

export const root = NodePath.resolve(import.meta.dirname, "..")
export const corralBin = NodePath.join(root, "apps/cli/bin/corral")

export const tempDir = (prefix: string): string => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), prefix))

export const git = (repo: string, ...args: Array<string>): string =>
  execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], {
    cwd: repo,
    encoding: "utf8"
  })

export const makeRepo = (files: Record<string, string> = { "README.md": "# test\n" }): string => {
  const repo = tempDir("corral-e2e-")
  git(repo, "init", "-q", "-b", "main")
  for (const [file, text] of Object.entries(files)) {
    NodeFs.mkdirSync(NodePath.dirname(NodePath.join(repo, file)), { recursive: true })
    NodeFs.writeFileSync(NodePath.join(repo, file), text)
  }
  git(repo, "add", "-A")
  git(repo, "commit", "-q", "-m", "init")
  return repo
}

export const writePlan = (dir: string, name: string, text: string): string => {
  const file = NodePath.join(dir, name)
  NodeFs.writeFileSync(file, text)
  return file
}

export interface CliRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface RunningCli {
  readonly pid: number
  readonly output: () => string
  readonly done: Promise<CliRun>
  readonly signal: (signal: NodeJS.Signals) => void
}

export const startCli = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string> }
): RunningCli => {
  const child = spawn(corralBin, [...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk) => (stdout += chunk))
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const done = new Promise<CliRun>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  )
  return { pid: child.pid!, output: () => stdout + stderr, done, signal: (s) => child.kill(s) }
}

export const runCli = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: Record<string, string> }
) => startCli(args, options).done

export const waitFor = async (check: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return !/\) Z /.test(stat)
  } catch {
    return false
  }
}

export const worktrees = (repo: string): Array<string> =>
  git(repo, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((line) => line.startsWith("worktree "))
    .map((line) => line.slice("worktree ".length))

export const branches = (repo: string): Array<string> =>
  git(repo, "branch", "--format=%(refname:short)")
    .split("\n")
    .filter((b) => b.length > 0)
