import { execFile, execFileSync } from "node:child_process"
import { promisify } from "node:util"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Workspace } from "@corral/platform-node/Workspace"
import * as Effect from "effect/Effect"

export interface WorkspaceMeasurement {
  readonly location: string
  readonly method: "corral" | "corral sparse (1/10)" | "git worktree add" | "cp -r"
  readonly agents: number
  readonly createMs: number
  readonly perWorkspaceMs: number
  readonly removeMs: number
  readonly diskMbPerWorkspace: number
}

const git = (cwd: string, ...args: Array<string>) => execFileSync("git", args, { cwd, encoding: "utf8" }).trim()

const run = promisify(execFile)

/**
 * Runs `task` for every item with all of them in flight at once, as corral acquires its workspaces, so
 * every approach is measured at the same concurrency. A git command that lost a race for one of git's
 * lock files is retried (as corral does).
 */
const concurrently = <T>(items: ReadonlyArray<T>, task: (item: T, index: number) => Promise<unknown>) =>
  Promise.all(items.map((item, index) => task(item, index)))

const gitAsync = async (cwd: string, ...args: Array<string>): Promise<void> => {
  for (let attempt = 0; ; attempt++) {
    try {
      await run("git", args, { cwd })
      return
    } catch (error) {
      const text = String((error as { stderr?: unknown }).stderr ?? error)
      if (attempt >= 20 || !/\.lock|could not lock|Unable to create/.test(text)) throw error
      await new Promise((resolve) => setTimeout(resolve, 5 + attempt * 5))
    }
  }
}

const duKb = (dir: string) => Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0])

const generateRepo = (root: string, files: number, bytesPerFile: number) => {
  fs.mkdirSync(root, { recursive: true })
  git(root, "init", "--quiet", "--initial-branch=main")
  for (let i = 0; i < files; i++) {
    const dir = path.join(root, `pkg${i % 50}`, `mod${i % 7}`)
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, `file${i}.txt`), randomBytes(bytesPerFile / 2).toString("hex"))
  }
  git(root, "add", ".")
  git(root, "-c", "user.name=bench", "-c", "user.email=bench@bench", "commit", "--quiet", "-m", "generated")
}

const timed = async (run: () => Promise<unknown> | unknown) => {
  const start = performance.now()
  await run()
  return performance.now() - start
}

const corralRow = async (
  location: string,
  repo: string,
  agents: number,
  sparse?: ReadonlyArray<string>
): Promise<WorkspaceMeasurement> => {
  const ids = Array.from({ length: agents }, (_, i) => `a${i}`)
  const measured = { createMs: 0, kb: 0, duMs: 0 }
  const started = performance.now()
  await Effect.runPromise(
    Effect.gen(function* () {
      const ws = yield* Workspace
      const runId = `bench${agents}${sparse === undefined ? "" : "s"}`
      const handles = yield* Effect.forEach(ids, (agentId) => ws.acquire({ repo, runId, agentId, sparse }), {
        concurrency: "unbounded"
      })
      measured.createMs = performance.now() - started
      const duStart = performance.now()
      measured.kb = duKb(path.dirname(handles[0]!.dir)) / agents
      measured.duMs = performance.now() - duStart
    }).pipe(Effect.scoped, Effect.provide(Workspace.layer))
  )
  const removeMs = performance.now() - started - measured.createMs - measured.duMs
  return row(
    location,
    sparse === undefined ? "corral" : "corral sparse (1/10)",
    agents,
    measured.createMs,
    removeMs,
    measured.kb
  )
}

const row = (
  location: string,
  method: WorkspaceMeasurement["method"],
  agents: number,
  createMs: number,
  removeMs: number,
  kb: number
): WorkspaceMeasurement => ({
  location,
  method,
  agents,
  createMs: Math.round(createMs),
  perWorkspaceMs: Math.round(createMs / agents),
  removeMs: Math.round(removeMs),
  diskMbPerWorkspace: Math.round(kb / 102.4) / 10
})

const plainWorktreeRow = async (location: string, repo: string, agents: number) => {
  const dirs = Array.from({ length: agents }, (_, i) => path.join(location, `plain-${agents}-${i}`))
  const createMs = await timed(() =>
    concurrently(dirs, (dir, i) => gitAsync(repo, "worktree", "add", "--quiet", "-b", `plain${agents}-${i}`, dir))
  )
  const kb = dirs.reduce((sum, dir) => sum + duKb(dir), 0) / agents
  const removeMs = await timed(() =>
    concurrently(dirs, async (dir, i) => {
      await gitAsync(repo, "worktree", "remove", "--force", dir)
      await gitAsync(repo, "branch", "-D", `plain${agents}-${i}`)
    })
  )
  return row(location, "git worktree add", agents, createMs, removeMs, kb)
}

const copyRow = async (location: string, repo: string, agents: number) => {
  const dirs = Array.from({ length: agents }, (_, i) => path.join(location, `copy-${agents}-${i}`))
  const createMs = await timed(() => concurrently(dirs, (dir) => run("cp", ["-r", repo, dir])))
  const kb = dirs.reduce((sum, dir) => sum + duKb(dir), 0) / agents
  const removeMs = await timed(() => concurrently(dirs, (dir) => fs.promises.rm(dir, { recursive: true, force: true })))
  return row(location, "cp -r", agents, createMs, removeMs, kb)
}

/**
 * Time and disk per workspace for 1, 4 and 8 agents on a generated repository (~5,000 files, ~50 MB),
 * comparing corral's `Workspace.acquire` with plain `git worktree add` and `cp -r`, on tmpfs and disk.
 * Every approach creates (and removes) its N workspaces at once.
 *
 * @example
 * ```ts
 * import { measureWorkspaces } from "./workspaces.ts"
 *
 * console.table(await measureWorkspaces())
 * ```
 */
export async function measureWorkspaces(
  options: { readonly files?: number; readonly bytesPerFile?: number; readonly locations?: ReadonlyArray<string> } = {}
): Promise<Array<WorkspaceMeasurement>> {
  const locations = options.locations ?? ["/dev/shm", os.tmpdir()].filter((dir) => fs.existsSync(dir))
  const results: Array<WorkspaceMeasurement> = []
  for (const base of locations) {
    const location = fs.mkdtempSync(path.join(base, "corral-bench-"))
    try {
      const repo = path.join(location, "repo")
      generateRepo(repo, options.files ?? 5000, options.bytesPerFile ?? 10_000)
      for (const agents of [1, 4, 8]) {
        results.push(await corralRow(base, repo, agents))
        results.push(await corralRow(base, repo, agents, ["pkg0", "pkg1", "pkg2", "pkg3", "pkg4"]))
        results.push({ ...(await plainWorktreeRow(location, repo, agents)), location: base })
        results.push({ ...(await copyRow(location, repo, agents)), location: base })
      }
    } finally {
      fs.rmSync(location, { recursive: true, force: true })
    }
  }
  return results
}
