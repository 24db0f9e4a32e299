import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { onTestFinished } from "vitest"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

export const root = NodePath.resolve(import.meta.dirname, "..")
/**
 * The command the end-to-end tests run: the sources (`apps/cli/bin/corral`), or the executable named
 * by `CORRAL_TEST_BIN` (e.g. a script running the built bundle, `node apps/cli/dist/bin.js "$@"`).
 */
export const corralBin = process.env.CORRAL_TEST_BIN ?? NodePath.join(root, "apps/cli/bin/corral")

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

const running = new Set<ChildProcess>()

process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/**
 * Stops a `corral` a test left running (the test failed or timed out before it ended): Ctrl-C first,
 * so corral stops its agents and cleans up as a user's Ctrl-C would, then SIGKILL.
 */
const stopLeftover = async (child: ChildProcess, closed: Promise<unknown>): Promise<void> => {
  if (!running.has(child)) return
  child.kill("SIGINT")
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
  await closed
  clearTimeout(timer)
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
  running.add(child)
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk) => (stdout += chunk))
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const done = new Promise<CliRun>((resolve) =>
    child.on("close", (code, signal) => {
      running.delete(child)
      resolve({ code, signal, stdout, stderr })
    })
  )
  try {
    onTestFinished(() => stopLeftover(child, done), 30_000)
  } catch {
    // started outside a test (beforeAll): the exit hook above still kills it
  }
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

/**
 * The pid a test's agent wrote to `file` (`echo $$ > file`), or `undefined` until the line is whole: the
 * shell creates the file before it writes to it, and an empty file read as a pid is 0.
 */
export const pidIn = (file: string): number | undefined => {
  let text: string
  try {
    text = NodeFs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
  return /^[1-9]\d*\n$/.test(text) ? Number(text) : undefined
}

/** The pids written to the files of `dir` (see {@link pidIn}) once `count` files hold one each. */
export const pidsIn = (dir: string, count: number): Array<number> | undefined => {
  const pids = NodeFs.readdirSync(dir).map((file) => pidIn(NodePath.join(dir, file)))
  return pids.length === count && pids.every((pid) => pid !== undefined) ? (pids as Array<number>) : undefined
}

/** Whether `pid` still runs; a zombie (killed, not yet reaped) counts as gone. */
export { isAlive, parentOf } from "../packages/platform-node/test/support/processes.ts"

export const worktrees = (repo: string): Array<string> =>
  git(repo, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((line) => line.startsWith("worktree "))
    .map((line) => line.slice("worktree ".length))

export const branches = (repo: string): Array<string> =>
  git(repo, "branch", "--format=%(refname:short)")
    .split("\n")
    .filter((b) => b.length > 0)

/** The JSON events `corral run --json` printed (its lines that start with `{`). */
export const jsonEvents = <A = any>(stdout: string): Array<A> =>
  stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as A)

/** The outcome in the `Finished` event of `agentId`. */
export const finishedOutcome = (events: ReadonlyArray<any>, agentId: string) =>
  events.find((event) => event.type === "Finished" && event.agentId === agentId)?.outcome

/** The name of the run's integration branch (`corral/<run>/integration`) in `repo`. */
export const integrationBranch = (repo: string): string =>
  git(repo, "branch", "--list", "corral/*/integration")
    .trim()
    .replace(/^[*+ ]+/, "")

/** A temporary folder of executable scripts, `name` → text: fake tools to put first on `PATH`. */
export const fakeTools = (tools: Record<string, string>): string => {
  const dir = tempDir("fake-bin-")
  for (const [name, text] of Object.entries(tools)) {
    NodeFs.writeFileSync(NodePath.join(dir, name), text)
    NodeFs.chmodSync(NodePath.join(dir, name), 0o755)
  }
  return dir
}

/** Writes `text` as `name` in a fresh temporary folder and returns its path. */
export const planFile = (text: string, name = "plan.yaml"): string => writePlan(tempDir("plan-"), name, text)
