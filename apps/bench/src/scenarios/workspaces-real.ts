import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { overlayProblem } from "@corral/platform-node/Workspace"
import { mulberry32 } from "../lib/async.ts"
import { type GitShim, makeGitShim, readGitLog } from "../lib/gitCpu.ts"
import { metricAtLeast, metricAtMost, overFloor, ratioAtMost } from "../lib/targets.ts"
import type { Approach, Case, Sample, Scenario } from "../types.ts"

interface Params {
  /** A generated repository shared by every run of the case (each run works on its own clone). */
  readonly source: string
  readonly scratch: string
  readonly concurrency: number
  /** The tree a sequential run produces, the reference every approach is compared with. */
  readonly expectedTree: string
  /** The `git` shim that logs every git command's CPU (`undefined` without a C compiler). */
  readonly shim: GitShim | undefined
}

const ms = (value: number) => `${value.toFixed(0)} ms`
const same = (value: number) => (value === 1 ? "same tree" : "different tree")

const AGENTS = 10
const FOLDERS_PER_AGENT = 10
/**
 * `corral` as users get it: the published bundle (`apps/cli/dist/bin.js`, built here once by the
 * command's build script, as `pnpm build` does) on this Node; or the executable named by
 * `CORRAL_BENCH_BIN`, e.g. `apps/cli/bin/corral`, the sources as contributors and `pnpm` scripts run
 * them (≈ 0.2 s more CPU at start-up).
 */
let corralCommand: string | undefined
const corralBin = (): string => {
  if (corralCommand !== undefined) return corralCommand
  if (process.env.CORRAL_BENCH_BIN !== undefined) return (corralCommand = process.env.CORRAL_BENCH_BIN)
  execFileSync(process.execPath, [fileURLToPath(new URL("../../../cli/scripts/bundle.ts", import.meta.url))])
  const bin = fileURLToPath(new URL("../../../cli/dist/bin.js", import.meta.url))
  return (corralCommand = `${process.execPath} ${bin}`)
}

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@bench", ...args], {
    cwd,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  }).trim()

const sh = (cwd: string, command: string, env?: Record<string, string>) =>
  new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
    execFile(
      "sh",
      ["-c", command],
      { cwd, maxBuffer: 256 * 1024 * 1024, ...(env === undefined ? {} : { env: { ...process.env, ...env } }) },
      (error, stdout, stderr) =>
        error === null ? resolve({ stdout, stderr }) : reject(new Error(`${command}: ${stderr || error.message}`))
    )
  )

const clockTicks = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/**
 * CPU time (user + system, ms) of this process's children that have been waited for, and of their
 * waited-for descendants (`cutime` + `cstime` of `/proc/self/stat`): the difference around one
 * approach is the CPU of its whole process tree, as `perf stat -e task-clock` would count it, in
 * 1/CLK_TCK steps. `undefined` where there is no `/proc`.
 */
const childCpuMs = (): number | undefined => {
  try {
    const stat = fs.readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / clockTicks
  } catch {
    return undefined
  }
}

const cores = os.availableParallelism()

/**
 * The process-tree CPU spent since `before` (from {@link childCpuMs}), as a metric when known, and
 * that CPU over the machine's cores: the least wall time the approach's CPU allows here.
 */
const cpuSince = (before: number | undefined): Record<string, number> => {
  const after = childCpuMs()
  return before === undefined || after === undefined
    ? {}
    : { cpuMs: after - before, cpuFloorMs: (after - before) / cores }
}

/** A CPU-bound, deterministic rewrite of every file in the folders given: a formatter's stand-in. */
const rewriteScript = `
import { createHash } from "node:crypto"
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
for (const folder of process.argv.slice(2)) {
  for (const name of readdirSync(folder).sort()) {
    const file = join(folder, name)
    const lines = readFileSync(file, "utf8").split("\\n")
    const out = lines.map((line) => {
      let digest = line
      for (let round = 0; round < 40; round++) digest = createHash("sha256").update(digest).digest("hex")
      return line.length === 0 ? line : line.trim().replace(/\\s+/g, " ") + " // " + digest.slice(0, 8)
    })
    writeFileSync(file, out.join("\\n"))
  }
}
`

const checkScript = `
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
let files = 0
for (const pkg of readdirSync("src").sort())
  for (const mod of readdirSync(join("src", pkg)).sort())
    for (const name of readdirSync(join("src", pkg, mod))) {
      const text = readFileSync(join("src", pkg, mod, name), "utf8")
      if (!text.includes(" // ")) { console.error("not rewritten: " + join(pkg, mod, name)); process.exit(1) }
      files++
    }
writeFileSync("CHECKED.txt", files + " files rewritten\\n")
`

const folderOf = (agent: number, folder: number) => `src/pkg${agent}/mod${folder}`

const generate = (root: string, files: number, bytesPerFile: number) => {
  const random = mulberry32(20_261_126)
  fs.mkdirSync(root, { recursive: true })
  git(root, "init", "--quiet", "--initial-branch=main")
  const words = ["const", "value", "return", "async", "await", "export", "import", "type", "=>", "{", "}"]
  for (let i = 0; i < files; i++) {
    const folder = folderOf(i % AGENTS, Math.floor(i / AGENTS) % FOLDERS_PER_AGENT)
    fs.mkdirSync(path.join(root, folder), { recursive: true })
    const lines: Array<string> = []
    let size = 0
    while (size < bytesPerFile) {
      const line = Array.from({ length: 8 }, () => words[Math.floor(random() * words.length)]).join("   ")
      lines.push(line)
      size += line.length + 1
    }
    fs.writeFileSync(path.join(root, folder, `file${i}.ts`), `${lines.join("\n")}\n`)
  }
  fs.writeFileSync(path.join(root, "CHANGELOG.md"), "# Changelog\n\n- pkg0: pending\n\n- pkg1: pending\n")
  git(root, "add", ".")
  git(root, "commit", "--quiet", "-m", "generated")
}

const agentCommand = (tools: string, agent: number) => {
  const folders = Array.from({ length: FOLDERS_PER_AGENT }, (_, f) => folderOf(agent, f)).join(" ")
  const changelog = agent < 2 ? ` && sed -i 's/- pkg${agent}: pending/- pkg${agent}: formatted/' CHANGELOG.md` : ""
  return `node ${path.join(tools, "rewrite.mjs")} ${folders}${changelog}`
}

const checkCommand = (tools: string) => `node ${path.join(tools, "check.mjs")}`

/**
 * The plan; with `sparse`, the folder agents check out only the folder they claim (and top-level
 * files); with `overlay`, every agent (the check too) runs in an overlay workspace.
 */
const planYaml = (tools: string, workspace: "full" | "sparse" | "overlay") =>
  [
    "agents:",
    ...Array.from({ length: AGENTS }, (_, agent) =>
      [
        `  - id: fmt-pkg${agent}`,
        `    run: ${JSON.stringify(agentCommand(tools, agent))}`,
        `    claims: { write: [src/pkg${agent}/${agent < 2 ? ", CHANGELOG.md" : ""}] }`,
        ...(workspace === "sparse" ? ["    sparse: true"] : []),
        ...(workspace === "overlay" ? ["    overlay: true"] : [])
      ].join("\n")
    ),
    "  - id: check",
    `    run: ${JSON.stringify(checkCommand(tools))}`,
    ...(workspace === "overlay" ? ["    overlay: true"] : []),
    `    dependsOn: [${Array.from({ length: AGENTS }, (_, a) => `fmt-pkg${a}`).join(", ")}]`,
    ""
  ].join("\n")

let clones = 0
const cloneOf = (params: Params) => {
  const dir = path.join(params.scratch, `clone-${clones++}`)
  execFileSync("git", ["clone", "--quiet", "--local", params.source, dir])
  return dir
}

const toolsOf = (params: Params) => path.join(params.scratch, "tools")

const treeOf = (dir: string) => {
  git(dir, "add", "--all")
  return git(dir, "write-tree")
}

const finish = (dir: string, expectedTree: string, ms: number, metrics: Record<string, number>): Sample => {
  const sameTree = treeOf(dir) === expectedTree ? 1 : 0
  fs.rmSync(dir, { recursive: true, force: true })
  return { ms, metrics: { ...metrics, sameTree } }
}

const sequential: Approach<Params> = {
  name: "sequential",
  run: async (params) => {
    const dir = cloneOf(params)
    const tools = toolsOf(params)
    const cpu = childCpuMs()
    const start = performance.now()
    for (let agent = 0; agent < AGENTS; agent++) await sh(dir, agentCommand(tools, agent))
    await sh(dir, checkCommand(tools))
    const ms = performance.now() - start
    return finish(dir, params.expectedTree, ms, cpuSince(cpu))
  }
}

const xargs: Approach<Params> = {
  name: "xargs -P N",
  run: async (params) => {
    const dir = cloneOf(params)
    const tools = toolsOf(params)
    const commands = Array.from({ length: AGENTS }, (_, agent) => agentCommand(tools, agent))
    const list = path.join(params.scratch, `xargs-${clones}.txt`)
    fs.writeFileSync(list, `${commands.join("\n")}\n`)
    const cpu = childCpuMs()
    const start = performance.now()
    await sh(dir, `xargs -d '\\n' -P ${params.concurrency} -I{} sh -c {} < ${list}`)
    await sh(dir, checkCommand(tools))
    const ms = performance.now() - start
    return finish(dir, params.expectedTree, ms, cpuSince(cpu))
  }
}

/**
 * One agent of the plain-git floor, as a careful user would script it with git alone: a detached
 * worktree at the integration head (the add under the repository lock, since concurrent
 * `worktree add`s fail with `failed to read .git/worktrees/<x>/commondir`; the checkout after it),
 * the command, `add -A` + `commit`, a merge into the integration branch under a merge lock
 * (`merge-tree --write-tree` + `commit-tree` + `update-ref` with the old value), and the removal.
 * Arguments: repository, lock folder, worktree folder, agent id, the command's script file.
 */
const floorAgentScript = `
set -eu
repo=$1 locks=$2 wt=$3 id=$4 script=$5
cd "$repo"
exec 8>"$locks/repo"
flock 8
head=$(git rev-parse refs/heads/floor)
git worktree add --quiet --detach --no-checkout "$wt" "$head"
flock -u 8
cd "$wt"
git reset --quiet --hard
sh "$script"
git add -A
git -c user.name=floor -c user.email=floor@localhost commit --quiet --allow-empty -m "$id"
commit=$(git rev-parse HEAD)
cd "$repo"
exec 9>"$locks/merge"
flock 9
base=$(git rev-parse refs/heads/floor)
tree=$(git merge-tree --write-tree "$base" "$commit")
merged=$(git -c user.name=floor -c user.email=floor@localhost commit-tree "$tree" -p "$base" -p "$commit" -m "merge $id")
git update-ref refs/heads/floor "$merged" "$base"
flock -u 9
flock 8
git worktree remove --force "$wt"
`

/**
 * The order corral's claims give the agents at concurrency N: `fmt-pkg1` waits for `fmt-pkg0`
 * (both write `CHANGELOG.md`) and takes the first slot freed after it, the others keep plan order.
 */
const claimOrder = (concurrency: number) => {
  const others = Array.from({ length: AGENTS - 2 }, (_, i) => i + 2)
  return [0, ...others.slice(0, concurrency - 1), 1, ...others.slice(concurrency - 1)]
}

/**
 * Runs a floor: each agent's command written to `<locks>/<id>.sh` and started by `agentLine` (the
 * two `CHANGELOG.md` agents under one `flock`, in claim order) through `xargs -P N` from `list`, then
 * the check the same way and the `finish` command (timed), in `dir` on branch `floor`; measured as
 * corral's rows are: the process tree's CPU, git commands and git CPU from the shim, the tree against
 * the sequential one. Fails when the floor left a worktree; removes `remove` afterwards.
 */
const measureFloor = async (
  params: Params,
  floor: {
    readonly name: string
    readonly dir: string
    readonly run: number
    readonly locks: string
    readonly list: string
    readonly agentLine: (id: string, script: string) => string
    readonly finish?: string
    readonly remove: ReadonlyArray<string>
  }
) => {
  const { dir } = floor
  const tools = toolsOf(params)
  const line = (id: string, command: string, claim: boolean) => {
    const script = path.join(floor.locks, `${id}.sh`)
    fs.writeFileSync(script, `${command}\n`)
    const lock = claim ? `flock ${path.join(floor.locks, "changelog")} ` : ""
    return `${lock}${floor.agentLine(id, script)}`
  }
  const lines = claimOrder(params.concurrency).map((agent) =>
    line(`fmt-pkg${agent}`, agentCommand(tools, agent), agent < 2)
  )
  fs.writeFileSync(floor.list, `${lines.join("\n")}\n`)
  const check = line("check", checkCommand(tools), false)
  git(dir, "branch", "floor", "HEAD")
  const log = path.join(params.scratch, `git-${floor.run}.log`)
  const env = params.shim?.env(log)
  const cpu = childCpuMs()
  const start = performance.now()
  await sh(dir, `xargs -d '\\n' -P ${params.concurrency} -I{} sh -c {} < ${floor.list}`, env)
  await sh(dir, check, env)
  if (floor.finish !== undefined) await sh(dir, floor.finish)
  const ms = performance.now() - start
  const cpuMetric = cpuSince(cpu)
  const commands = readGitLog(log).length
  const sameTree = git(dir, "rev-parse", "floor^{tree}") === params.expectedTree ? 1 : 0
  const worktreesLeft =
    git(dir, "worktree", "list", "--porcelain")
      .split("\n")
      .filter((l) => l.startsWith("worktree ")).length - 1
  if (worktreesLeft !== 0) throw new Error(`${floor.name} left ${worktreesLeft} worktrees`)
  for (const folder of floor.remove) fs.rmSync(folder, { recursive: true, force: true })
  const agents = AGENTS + 1
  return {
    ms,
    metrics: {
      ...cpuMetric,
      ...(commands === 0 ? {} : { gitPerAgent: commands / agents }),
      ...gitCpuPerAgent(log, agents),
      sameTree
    }
  }
}

/**
 * The floor of isolation: the same agents, at the same concurrency (`xargs -P N`), each in its own
 * plain `git worktree` merged back serialized ({@link floorAgentScript}); the two `CHANGELOG.md`
 * agents hold a lock from before their worktree to after their merge (the claim), and the check runs
 * the same way after all. Its git CPU comes from the same shim as corral's.
 */
const plainWorktrees: Approach<Params> = {
  name: "plain git worktrees",
  run: async (params) => {
    const dir = cloneOf(params)
    const tools = toolsOf(params)
    const run = clones
    const locks = path.join(params.scratch, `floor-locks-${run}`)
    const trees = path.join(params.scratch, `floor-trees-${run}`)
    fs.mkdirSync(locks)
    fs.mkdirSync(trees)
    const agentScript = path.join(tools, "floor-agent.sh")
    const list = path.join(params.scratch, `floor-${run}.txt`)
    return measureFloor(params, {
      name: "the plain-git floor",
      dir,
      run,
      locks,
      list,
      agentLine: (id, script) => `sh ${agentScript} ${dir} ${locks} ${path.join(trees, id)} ${id} ${script}`,
      remove: [dir, locks, trees, list]
    })
  }
}

/**
 * One agent of the plain-overlay floor, as a careful user would script overlay isolation: under the
 * snapshot lock, the integration head's snapshot is made unless it exists (the first a `read-tree` +
 * `checkout-index --all` export, a later one a `cp -al` of the latest with the paths `diff-tree`
 * lists deleted or rewritten, as corral's are; its index, without stat data, is the agents' index);
 * under the repository lock a `worktree add --no-checkout` at the head, given that index; then one
 * `unshare -rm` namespace mounts the overlay (the snapshot below, the agent's upper folder holding
 * the worktree's `.git` file above) on the worktree's folder and runs the command and the `add -A`
 * of the paths the upper folder holds ({@link plainOverlayMount}); outside it `write-tree` +
 * `commit-tree` from that index (no refresh); the merge under the merge lock as the plain-git floor
 * does; and the removal of the worktree and the agent's folders. Arguments: repository, lock
 * folder, the run's overlay folder, agent id, the command's script file, the mount script.
 */
const plainOverlayAgentScript = `
set -eu
repo=$1 locks=$2 run=$3 id=$4 script=$5 mountScript=$6
cd "$repo"
exec 7>"$locks/snapshot"
flock 7
head=$(git rev-parse refs/heads/floor)
snap=$run/snapshots/$head
if [ ! -d "$snap" ]; then
  index=$snap.index
  GIT_INDEX_FILE=$index git read-tree "$head"
  if [ -f "$run/latest" ]; then
    latest=$(cat "$run/latest")
    cp -al "$run/snapshots/$latest" "$snap.tmp"
    git diff-tree -r -z --no-renames --name-only --diff-filter=D "$latest" "$head" | (cd "$snap.tmp" && xargs -0r rm -f --)
    git diff-tree -r -z --no-renames --name-only --diff-filter=d "$latest" "$head" |
      GIT_INDEX_FILE=$index git checkout-index --force -z --stdin --prefix="$snap.tmp/"
  else
    mkdir -p "$snap.tmp"
    GIT_INDEX_FILE=$index git checkout-index --all --force --prefix="$snap.tmp/"
  fi
  mv "$snap.tmp" "$snap"
  echo "$head" > "$run/latest"
fi
flock -u 7
wt=$run/worktrees/$id agent=$run/agents/$id
exec 8>"$locks/repo"
flock 8
git worktree add --quiet --detach --no-checkout "$wt" "$head"
flock -u 8
gitdir=$(sed 's/^gitdir: //' "$wt/.git")
cp "$snap.index" "$gitdir/index"
mkdir -p "$agent/upper" "$agent/work"
cp "$wt/.git" "$agent/upper/.git"
unshare -rm sh "$mountScript" "$snap" "$agent/upper" "$agent/work" "$wt" "$script"
tree=$(git -C "$wt" write-tree)
commit=$(git -c user.name=floor -c user.email=floor@localhost commit-tree "$tree" -p "$head" -m "$id")
exec 9>"$locks/merge"
flock 9
base=$(git rev-parse refs/heads/floor)
tree=$(git merge-tree --write-tree "$base" "$commit")
merged=$(git -c user.name=floor -c user.email=floor@localhost commit-tree "$tree" -p "$base" -p "$commit" -m "merge $id")
git update-ref refs/heads/floor "$merged" "$base"
flock -u 9
flock 8
git worktree remove --force "$wt"
flock -u 8
rm -rf "$agent"
`

/**
 * Run by {@link plainOverlayAgentScript} in its `unshare -rm` namespace: mounts the overlay on the
 * worktree's folder, runs the command there, then stages what the upper folder holds (files, links
 * and whiteouts: this job replaces no folder) with `add -A`, loose objects uncompressed as corral
 * writes them. Arguments: lower, upper, work, worktree folder, the command's script file.
 */
const plainOverlayMount = `
set -eu
mount -t overlay overlay -o "userxattr,lowerdir=$1,upperdir=$2,workdir=$3" "$4"
cd "$4"
sh "$5"
paths=$3/../paths
(cd "$2" && find . ! -type d ! -path ./.git -print0) > "$paths"
if [ -s "$paths" ]; then
  GIT_LITERAL_PATHSPECS=1 git -c core.looseCompression=0 add -A --pathspec-from-file="$paths" --pathspec-file-nul
fi
`

/** A plain-overlay run's folders, under the scratch folder. */
const overlayFolders = (params: Params, run: number) => {
  const locks = path.join(params.scratch, `plain-overlay-locks-${run}`)
  const overlay = path.join(params.scratch, `plain-overlay-${run}`)
  return { locks, overlay, list: path.join(params.scratch, `plain-overlay-${run}.txt`) }
}

/**
 * The floor of overlay isolation: the same agents at the same concurrency (`xargs -P N`), each in an
 * overlay of a snapshot shared per integration head ({@link plainOverlayAgentScript}); the
 * `CHANGELOG.md` agents serialized by a lock and the check after all, as in the plain-git floor; the
 * snapshots removed when the run ends. Fails, saying why, where overlays cannot be mounted.
 */
const plainOverlay: Approach<Params> = {
  name: "plain overlay",
  run: async (params) => {
    const problem = overlayProblem()
    if (problem !== undefined) throw new Error(`skipped: ${problem}`)
    const dir = cloneOf(params)
    const tools = toolsOf(params)
    const run = clones
    const { locks, overlay, list } = overlayFolders(params, run)
    for (const folder of [locks, path.join(overlay, "snapshots"), path.join(overlay, "agents")])
      fs.mkdirSync(folder, { recursive: true })
    const agentScript = path.join(tools, "plain-overlay-agent.sh")
    const mountScript = path.join(tools, "plain-overlay-mount.sh")
    return measureFloor(params, {
      name: "the plain-overlay floor",
      dir,
      run,
      locks,
      list,
      agentLine: (id, script) => `sh ${agentScript} ${dir} ${locks} ${overlay} ${id} ${script} ${mountScript}`,
      finish: `rm -rf ${overlay}`,
      remove: [dir, locks, list]
    })
  }
}

interface CorralEvent {
  readonly type: string
  readonly at: number
  readonly agentId?: string
  readonly outcome?: {
    readonly startedAt?: number | null
    readonly endedAt?: number
    readonly value?: { readonly process?: { readonly durationMs?: number } }
  }
}

/** When each agent gave its slot back: its `SlotReleased` event, else its end (`Finished`). */
const slotFreedAt = (events: ReadonlyArray<CorralEvent>) => {
  const freed = new Map<string, number>()
  for (const e of events) {
    if (e.type === "SlotReleased" && e.agentId !== undefined) freed.set(e.agentId, e.at)
    if (e.type === "Finished" && e.agentId !== undefined && !freed.has(e.agentId)) freed.set(e.agentId, e.at)
  }
  return freed
}

/**
 * Where corral's wall time goes: before its first event (process start-up, ledger, plan, integration
 * branch), after its last (the last workspaces' removal, summary, ledger close), and per agent the slot time that is not the
 * agent's own command (workspace set-up; commit and merge too when the slot is held until the end).
 */
const breakdown = (events: ReadonlyArray<CorralEvent>, spawnedAt: number, exitedAt: number) => {
  const started = events.find((e) => e.type === "RunStarted")?.at ?? spawnedAt
  const finished = events.find((e) => e.type === "RunFinished")?.at ?? exitedAt
  const freed = slotFreedAt(events)
  const overheads = events.flatMap((e) => {
    const outcome = e.type === "Finished" ? e.outcome : undefined
    const duration = outcome?.value?.process?.durationMs
    if (outcome?.startedAt == null || outcome.endedAt === undefined || duration === undefined) return []
    return [(freed.get(e.agentId!) ?? outcome.endedAt) - outcome.startedAt - duration]
  })
  return {
    startMs: started - spawnedAt,
    endMs: exitedAt - finished,
    agentOverheadMs: overheads.length === 0 ? 0 : overheads.reduce((a, b) => a + b, 0) / overheads.length
  }
}

/** Per agent: how long after its `Merged` event its slot was free (0 when it was freed before the merge). */
const slotHoldMs = (events: ReadonlyArray<CorralEvent>) => {
  const freed = slotFreedAt(events)
  const holds = events
    .filter((e) => e.type === "Merged" && freed.has(e.agentId!))
    .map((e) => Math.max(0, freed.get(e.agentId!)! - e.at))
  return holds.length === 0 ? 0 : Math.max(...holds)
}

/**
 * From `--verbose`: git commands and process time per agent, the run's own (`(run)` row), and the
 * agents' average set-up, commit and merge (prediction + landing) wall time.
 */
const gitPerAgent = (stderr: string) => {
  const all = [...stderr.matchAll(/^ {2}(\S+)\s+(\d+) commands\s+(\d+) ms(.*)$/gm)]
  const rows = all.filter((m) => m[1] !== "total" && m[1] !== "(run)")
  const run = all.find((m) => m[1] === "(run)")
  const commands = rows.reduce((sum, m) => sum + Number(m[2]), 0)
  const ms = rows.reduce((sum, m) => sum + Number(m[3]), 0)
  const phase = (name: string) => {
    const values = rows.flatMap((m) => {
      const found = new RegExp(`${name}\\s+(\\d+) ms`).exec(m[4] ?? "")
      return found === null ? [] : [Number(found[1])]
    })
    return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length
  }
  const own = { gitRun: Number(run?.[2] ?? 0) }
  const phases = { setUpMs: phase("set-up"), commitMs: phase("commit"), mergeMs: phase("merge") }
  return rows.length === 0
    ? { agents: 0, gitPerAgent: 0, gitMsPerAgent: 0, ...own, ...phases }
    : { agents: rows.length, gitPerAgent: commands / rows.length, gitMsPerAgent: ms / rows.length, ...own, ...phases }
}

/**
 * CPU (user + system) of every git process of the run, the run's own commands included, per agent,
 * from the shim's log; with `CORRAL_BENCH_GIT_LOGS=<folder>` the log is kept there.
 */
const gitCpuPerAgent = (log: string, agents: number): Record<string, number> => {
  const commands = readGitLog(log)
  const kept = process.env.CORRAL_BENCH_GIT_LOGS
  if (kept !== undefined) {
    fs.mkdirSync(kept, { recursive: true })
    fs.copyFileSync(log, path.join(kept, path.basename(log)))
  }
  fs.rmSync(log, { force: true })
  if (commands.length === 0 || agents === 0) return {}
  return { gitCpuMsPerAgent: commands.reduce((sum, c) => sum + c.cpuMs, 0) / agents }
}

/**
 * corral's run of `plan` (a file in the scratch folder); `env` is added to its environment
 * (`CORRAL_SPAWN_HELPER=0` for the row without the helper).
 */
const corralWith = (name: string, planFile: string, env?: Record<string, string>): Approach<Params> => ({
  name,
  run: async (params) => {
    const dir = cloneOf(params)
    const plan = path.join(params.scratch, planFile)
    const state = path.join(params.scratch, `state-${clones}`)
    const log = path.join(params.scratch, `git-${clones}.log`)
    const cpu = childCpuMs()
    const start = performance.now()
    const spawnedAt = Date.now()
    const out = await sh(
      dir,
      `${corralBin()} run ${plan} --concurrency ${params.concurrency} --json --verbose --state-dir ${state}`,
      { ...params.shim?.env(log), ...env }
    )
    const ms = performance.now() - start
    const exitedAt = Date.now()
    const cpuMetric = cpuSince(cpu)
    const events = out.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as CorralEvent)
    const integration = git(dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/")
      .split("\n")
      .find((ref) => ref.endsWith("/integration"))
    if (integration === undefined) throw new Error("corral left no integration branch")
    const sameTree = git(dir, "rev-parse", `${integration}^{tree}`) === params.expectedTree ? 1 : 0
    fs.rmSync(dir, { recursive: true, force: true })
    fs.rmSync(state, { recursive: true, force: true })
    const { agents, ...gitFigures } = gitPerAgent(out.stderr)
    return {
      ms,
      metrics: {
        ...cpuMetric,
        ...breakdown(events, spawnedAt, exitedAt),
        ...gitFigures,
        ...gitCpuPerAgent(log, agents),
        slotHoldMs: slotHoldMs(events),
        sameTree
      }
    }
  }
})

const corral = corralWith("corral", "plan.yaml")
const corralSparse = corralWith("corral sparse", "plan-sparse.yaml")
const corralOverlay = corralWith("corral overlay", "plan-overlay.yaml")
const corralDirectSpawn = corralWith("corral, no spawn helper", "plan.yaml", { CORRAL_SPAWN_HELPER: "0" })

const prepare = (base: string, quick: boolean) => {
  const scratch = fs.mkdtempSync(path.join(base, "corral-bench-real-"))
  process.once("exit", () => fs.rmSync(scratch, { recursive: true, force: true }))
  const source = path.join(scratch, "source")
  generate(source, quick ? 400 : 2000, quick ? 2_000 : 10_000)
  const tools = path.join(scratch, "tools")
  fs.mkdirSync(tools)
  fs.writeFileSync(path.join(tools, "rewrite.mjs"), rewriteScript)
  fs.writeFileSync(path.join(tools, "check.mjs"), checkScript)
  fs.writeFileSync(path.join(tools, "floor-agent.sh"), floorAgentScript)
  fs.writeFileSync(path.join(tools, "plain-overlay-agent.sh"), plainOverlayAgentScript)
  fs.writeFileSync(path.join(tools, "plain-overlay-mount.sh"), plainOverlayMount)
  fs.writeFileSync(path.join(scratch, "plan.yaml"), planYaml(tools, "full"))
  fs.writeFileSync(path.join(scratch, "plan-sparse.yaml"), planYaml(tools, "sparse"))
  fs.writeFileSync(path.join(scratch, "plan-overlay.yaml"), planYaml(tools, "overlay"))
  const reference = path.join(scratch, "reference")
  execFileSync("git", ["clone", "--quiet", "--local", source, reference])
  for (let agent = 0; agent < AGENTS; agent++)
    execFileSync("sh", ["-c", agentCommand(tools, agent)], { cwd: reference })
  execFileSync("sh", ["-c", checkCommand(tools)], { cwd: reference })
  const expectedTree = treeOf(reference)
  fs.rmSync(reference, { recursive: true, force: true })
  return { source, scratch, expectedTree, shim: makeGitShim(scratch) }
}

const locations = () =>
  [
    { name: "tmpfs", dir: "/dev/shm" },
    { name: "disk", dir: os.tmpdir() }
  ].filter((location) => fs.existsSync(location.dir))

/**
 * A real-scale worktree run: a generated repository shaped like a real one (≈ 2,000 files in ≈ 100
 * folders, ≈ 20 MB), a CPU-bound deterministic rewrite split by folder across 10 agents with write
 * claims on their folders, two of them serialized on `CHANGELOG.md`, and a `check` agent depending on
 * all ten. corral (`corral run --concurrency N`) against the same commands run one after another,
 * and with `sparse: true` on the ten folder agents (each checks out its own folder and the top-level
 * files, a tenth of the tree; the check stays full), with `overlay: true` on every agent (an overlay
 * of one read-only snapshot per integration head, nothing checked out per agent), through `xargs -P N` in one folder (no isolation,
 * no claims, no merge), and through `xargs -P N`
 * each in its own plain git worktree merged back ({@link plainWorktrees}, the floor of isolation),
 * and through `xargs -P N` each in an overlay of a shared snapshot merged back ({@link plainOverlay},
 * the floor of overlay isolation), on tmpfs and on disk.
 */
export const workspacesReal: Scenario<Params> = {
  name: "workspaces-real",
  description:
    "10 folder agents + 1 dependent check on a generated 2,000-file, 20 MB repository: corral (full, sparse and overlay workspaces) vs sequential vs xargs -P N vs plain git worktrees vs plain overlay (xargs -P N, one shell script per agent: the least git and mounting for overlay isolation — a snapshot per integration head shared by its agents, one unshare -rm + overlay mount per agent for the command and its add -A, write-tree + commit-tree, the plain-git row's locked merge; skipped, with the reason, where overlays cannot be mounted)",
  floor: "`xargs -P N` running the same commands in one folder, measured in the same run",
  targets: [
    ratioAtMost("corral ≤ 1.05× xargs -P N", /./, "corral", 1.05),
    ratioAtMost(
      "corral sparse (each folder agent checks out its claimed folder) ≤ 1.05× xargs -P N",
      /./,
      corralSparse.name,
      1.05
    ),
    ratioAtMost(
      "corral overlay (every agent in an overlay of a shared snapshot, nothing checked out) ≤ 1.05× xargs -P N",
      /./,
      corralOverlay.name,
      1.05
    ),
    overFloor(
      "remaining gap: corral ≤ 1.05× the plain-git worktree run (the floor of isolation) measured in the same run",
      /./,
      "corral",
      plainWorktrees.name,
      1.05,
      { floor: plainWorktrees.name, bound: "xargs -P N" }
    ),
    overFloor(
      "remaining gap: corral overlay ≤ 1.05× the plain overlay run (the floor of overlay isolation) measured in the same run",
      /./,
      corralOverlay.name,
      plainOverlay.name,
      1.05,
      { floor: plainOverlay.name, bound: "xargs -P N" }
    ),
    metricAtMost("git process time (CPU) ≤ 0.3 s per agent on tmpfs", /tmpfs/, "corral", "gitCpuMsPerAgent", 300, ms),
    metricAtMost("a slot is free ≤ 50 ms after the agent's merge", /./, "corral", "slotHoldMs", 50, ms),
    metricAtLeast("corral's integration tree equals the sequential result", /./, "corral", "sameTree", 1, same),
    metricAtLeast(
      "corral sparse's integration tree equals the sequential result",
      /./,
      corralSparse.name,
      "sameTree",
      1,
      same
    ),
    metricAtLeast(
      "corral overlay's integration tree equals the sequential result",
      /./,
      corralOverlay.name,
      "sameTree",
      1,
      same
    ),
    metricAtLeast(
      "the plain-git floor's tree equals the sequential result",
      /./,
      plainWorktrees.name,
      "sameTree",
      1,
      same
    ),
    metricAtLeast(
      "the plain-overlay floor's tree equals the sequential result",
      /./,
      plainOverlay.name,
      "sameTree",
      1,
      same
    )
  ],
  floorApproach: "xargs -P N",
  reps: 3,
  timeoutMs: 600_000,
  columns: [
    { key: "cpuMs", label: "CPU (process tree)", format: (v) => `${(v / 1000).toFixed(2)} s` },
    { key: "cpuFloorMs", label: "CPU ÷ cores", format: (v) => `${(v / 1000).toFixed(2)} s` },
    { key: "startMs", label: "before 1st event (ms)", format: (v) => v.toFixed(0) },
    { key: "endMs", label: "after last event (ms)", format: (v) => v.toFixed(0) },
    { key: "agentOverheadMs", label: "slot ms/agent not in its command", format: (v) => v.toFixed(0) },
    { key: "setUpMs", label: "set-up ms/agent", format: (v) => v.toFixed(0) },
    { key: "commitMs", label: "commit ms/agent", format: (v) => v.toFixed(0) },
    { key: "mergeMs", label: "merge ms/agent", format: (v) => v.toFixed(0) },
    { key: "gitPerAgent", label: "git cmds/agent", format: (v) => v.toFixed(1) },
    { key: "gitMsPerAgent", label: "git wall ms/agent", format: (v) => v.toFixed(0) },
    { key: "gitCpuMsPerAgent", label: "git CPU ms/agent", format: (v) => v.toFixed(1) },
    { key: "gitRun", label: "git cmds/run", format: (v) => v.toFixed(0) },
    { key: "slotHoldMs", label: "max slot hold after merge (ms)", format: (v) => v.toFixed(0) },
    { key: "sameTree", label: "same tree", format: (v) => (v === 1 ? "yes" : "no") }
  ],
  approaches: [sequential, xargs, plainWorktrees, plainOverlay, corral, corralSparse, corralOverlay, corralDirectSpawn],
  cases: ({ quick }) => {
    corralBin()
    const cases: Array<Case<Params>> = []
    for (const location of locations()) {
      const prepared = prepare(location.dir, quick)
      for (const concurrency of [2, 4]) {
        cases.push({
          label: `N = ${concurrency} on ${location.name}${quick ? " (quick: 400 files)" : ""}`,
          params: { ...prepared, concurrency }
        })
      }
    }
    return cases
  }
}
