import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"

/** A process by pid and start time (`/proc/<pid>/stat` field 22), so that a reused pid is told apart. */
export interface Parent {
  readonly pid: number
  readonly start: string | undefined
}

/** The start time of process `pid`, or `undefined` without /proc. */
export const startOf = (pid: number | "self"): string | undefined => {
  if (!existsSync(`/proc/${pid}/stat`)) return undefined
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
}

/**
 * The watchdog's shell script. With /proc, the parent counts as alive while `/proc/<pid>/stat` shows
 * a process that is no zombie (a killed runner whose own parent has not reaped it yet is one) and
 * started at `start` (a pid handed out again belongs to another process); without /proc, while
 * `kill -0` succeeds.
 */
export const script = (parent: Parent, group: number): string => {
  const alive =
    parent.start === undefined
      ? `kill -0 ${parent.pid} 2>/dev/null`
      : `{ read -r s < /proc/${parent.pid}/stat; } 2>/dev/null && set -- \${s##*) } && [ "$1" != Z ] && [ "\${20}" = ${parent.start} ]`
  return `while ${alive}; do kill -0 -${group} 2>/dev/null || exit 0; sleep 0.5; done; kill -KILL -${group} 2>/dev/null`
}

/**
 * Kills process group `group` once `parent` is gone; ends by itself when the group is gone. A failure
 * to start the watchdog kills the group at once: a runner's process never runs without one.
 */
export const watch = (parent: Parent, group: number): ChildProcess => {
  const child = spawn("/bin/sh", ["-c", script(parent, group)], { detached: true, stdio: "ignore" })
  child.on("error", () => {
    try {
      process.kill(-group, "SIGKILL")
    } catch {
      return
    }
  })
  child.unref()
  return child
}
