/**
 * Process groups left running by a run whose orchestrator died (`kill -9`, OOM, a closed laptop).
 * Each live agent process has a pid file under `<state-dir>/runs/<run-id>/pids/`; when a run is found
 * dead, its groups are stopped, then any other process that carries that run's `CORRAL_RUN_ID`
 * (descendants that left their group) — only processes that carry it, so a reused pid is never
 * touched.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

const pidDir = (stateDir: string, runId: string) => NodePath.join(stateDir, "runs", runId, "pids")

/**
 * Records (or, with `undefined`, forgets) the process group of a running agent.
 *
 * @since 0.1.0
 * @category recording
 */
export const track = (stateDir: string, runId: string, agentId: string, pid: number | undefined): void => {
  const dir = pidDir(stateDir, runId)
  const file = NodePath.join(dir, agentId)
  try {
    if (pid === undefined) NodeFs.rmSync(file, { force: true })
    else {
      NodeFs.mkdirSync(dir, { recursive: true })
      NodeFs.writeFileSync(file, String(pid))
    }
  } catch {
    return
  }
}

const belongsTo = (pid: number, runId: string): boolean => {
  try {
    return NodeFs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`CORRAL_RUN_ID=${runId}`)
  } catch {
    return false
  }
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * What {@link reap} would stop, without signalling or forgetting any (`corral gc --dry-run`): the
 * recorded process groups of dead runs that still run, then any other process carrying one of those
 * runs' `CORRAL_RUN_ID` outside those groups (one that left its group, such as a `setsid` daemon).
 *
 * @since 0.1.0
 * @category reaping
 */
export const left = (stateDir: string, runIds: ReadonlyArray<string>): ReadonlyArray<number> => {
  const groups = runIds.flatMap((runId) => {
    const dir = pidDir(stateDir, runId)
    if (!NodeFs.existsSync(dir)) return []
    return NodeFs.readdirSync(dir)
      .map((file) => Number(NodeFs.readFileSync(NodePath.join(dir, file), "utf8")))
      .filter((pid) => Number.isInteger(pid) && pid > 1 && belongsTo(pid, runId) && groupAlive(pid))
  })
  const inGroups = new Set(groups)
  const strays = runIds.length === 0 ? [] : carriers(new Set(runIds)).filter((pid) => !inGroups.has(groupOf(pid)))
  return [...groups, ...strays]
}

/** The process group of `pid` (field 5 of `/proc/<pid>/stat`), or `pid` itself when it cannot be read. */
const groupOf = (pid: number): number => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "latin1")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
  } catch {
    return pid
  }
}

/**
 * Stops the recorded process groups of dead runs, then any other process that still carries one of
 * those runs' `CORRAL_RUN_ID` (SIGTERM, then SIGKILL after `graceMs`), and returns the pids it
 * stopped.
 *
 * @since 0.1.0
 * @category reaping
 */
export const reap = (stateDir: string, runIds: ReadonlyArray<string>, graceMs = 2000) =>
  Effect.gen(function* () {
    const stopped: Array<number> = []
    for (const runId of runIds) {
      const dir = pidDir(stateDir, runId)
      if (!NodeFs.existsSync(dir)) continue
      for (const file of NodeFs.readdirSync(dir)) {
        const pid = Number(NodeFs.readFileSync(NodePath.join(dir, file), "utf8"))
        if (Number.isInteger(pid) && pid > 1 && belongsTo(pid, runId) && groupAlive(pid)) {
          process.kill(-pid, "SIGTERM")
          // A group stopped by the cpuPercent throttle acts on SIGTERM only once it runs again.
          process.kill(-pid, "SIGCONT")
          stopped.push(pid)
        }
        NodeFs.rmSync(NodePath.join(dir, file), { force: true })
      }
    }
    const runs = new Set(runIds)
    const strays = runs.size === 0 ? [] : carriers(runs)
    for (const pid of strays) signal(pid, "SIGTERM")
    if (stopped.length === 0 && strays.length === 0) return stopped
    const deadline = Date.now() + graceMs
    const left = () => stopped.some(groupAlive) || carriers(runs).length > 0
    while (left() && Date.now() < deadline) yield* Effect.sleep("50 millis")
    for (const pid of stopped) if (groupAlive(pid)) process.kill(-pid, "SIGKILL")
    for (const pid of carriers(runs)) signal(pid, "SIGKILL")
    return [...stopped, ...strays]
  })

const signal = (pid: number, name: NodeJS.Signals): void => {
  try {
    process.kill(pid, name)
  } catch {
    return
  }
}

/** This process and its ancestors: a corral started inside an agent of a dead run must not stop itself. */
const ancestors = (): Set<number> => {
  const found = new Set<number>()
  let pid = process.pid
  while (pid > 1 && !found.has(pid)) {
    found.add(pid)
    try {
      const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "latin1")
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    } catch {
      break
    }
  }
  return found
}

/**
 * Live processes (other than this one and its ancestors) whose environment names one of `runIds` as
 * `CORRAL_RUN_ID`: what is left of those runs' agents after their groups were stopped — members of a
 * group whose leader exited, and descendants that left the group (`setsid`, double fork).
 */
const carriers = (runIds: ReadonlySet<string>): Array<number> => {
  if (!NodeFs.existsSync("/proc/self/environ")) return []
  const self = ancestors()
  const found: Array<number> = []
  for (const entry of NodeFs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || self.has(Number(entry))) continue
    let environ: string
    try {
      environ = NodeFs.readFileSync(`/proc/${entry}/environ`, "latin1")
    } catch {
      continue
    }
    if (!environ.includes("CORRAL_RUN_ID=")) continue
    const variable = environ.split("\0").find((item) => item.startsWith("CORRAL_RUN_ID="))
    if (variable !== undefined && runIds.has(variable.slice("CORRAL_RUN_ID=".length))) found.push(Number(entry))
  }
  return found
}
