/**
 * Process groups left running by a run whose orchestrator died (`kill -9`, OOM, a closed laptop).
 * Each live agent process has a pid file under `<state-dir>/runs/<run-id>/pids/`; when a run is found
 * dead, its groups are stopped — but only processes that still carry that run's `CORRAL_RUN_ID`, so
 * a reused pid is never touched.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
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
 * Stops the recorded process groups of dead runs (SIGTERM, then SIGKILL after `graceMs`) and
 * returns the pids it stopped.
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
    if (stopped.length === 0) return stopped
    const deadline = Date.now() + graceMs
    while (stopped.some(groupAlive) && Date.now() < deadline) yield* Effect.sleep("50 millis")
    for (const pid of stopped) if (groupAlive(pid)) process.kill(-pid, "SIGKILL")
    return stopped
  })
