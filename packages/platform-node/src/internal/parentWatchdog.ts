/**
 * Kills a command's processes once another process — the one it must not outlive, e.g. a cluster
 * runner — is gone, SIGKILL of that process included (it then runs no finalizer of its own).
 *
 * The watchdog is a detached `/bin/sh` loop started **before** the command, so that there is no
 * instant at which the command runs unwatched: the process that spawns both can die between the
 * command's `spawn()` and anything it does afterwards. After the spawn it writes the command's
 * process group to the watchdog's stdin and closes it (or just closes it when the spawn failed).
 * Once the watched process is gone the watchdog kills that group, if it was told it, and every
 * process whose environment carries the run's `CORRAL_PROCESS_TOKEN` entry (the processes that
 * left the group included; processes in a bubblewrap sandbox are visible in /proc too), in rounds
 * 0.1 s apart, at least `MIN_ROUNDS` and until one finds none left (at most 10), then exits. A
 * process that an `exec` is replacing reads as having no environment at that instant (the kernel sets
 * up the new program's after replacing its memory), so one round can miss it; the next one, after
 * the exec is done, does not. While the watched process lives, the spawner stops the
 * watchdog when the command's run ends (`stop`).
 *
 * A shell loop rather than Node: a watchdog costs one small process per command instead of a
 * Node.js runtime, and reads one /proc file per half second.
 *
 * With /proc, the watched process counts as alive while `/proc/<pid>/stat` shows a process that is
 * no zombie (a killed process whose own parent has not reaped it yet is one) and started at
 * `start` (a pid handed out again belongs to another process); without /proc, while `kill -0`
 * succeeds.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { procAvailable, startOf } from "./processWatch.ts"

/** A process by pid and start time (`/proc/<pid>/stat` field 22), so that a reused pid is told apart. */
export interface Watched {
  readonly pid: number
  readonly start: number | undefined
}

/** The process `pid` with its start time, read now. */
export const watched = (pid: number): Watched => ({ pid, start: startOf(pid) })

/** How often the watchdog looks at the watched process, in seconds. */
export const INTERVAL_SECONDS = 0.5

/** The fewest rounds the watchdog makes once the watched process is gone (see the module comment). */
export const MIN_ROUNDS = 5

/** The watchdog's shell script; `token` is the run's `CORRAL_PROCESS_TOKEN=<id>` environment entry. */
export const script = (parent: Watched, token: string): string => {
  const alive =
    parent.start === undefined || !procAvailable
      ? `kill -0 ${parent.pid} 2>/dev/null`
      : `{ read -r s < /proc/${parent.pid}/stat; } 2>/dev/null && set -- \${s##*) } && [ "$1" != Z ] && [ "\${20}" = ${parent.start} ]`
  const tokens = procAvailable
    ? `for f in $(grep -lzxF -e '${token}' /proc/[0-9]*/environ 2>/dev/null); do f=\${f#/proc/}; kill -KILL \${f%/environ} 2>/dev/null && found=1; done; `
    : ""
  return [
    `while ${alive}; do sleep ${INTERVAL_SECONDS}; done`,
    `read -r g || :`,
    `n=0`,
    `while [ $n -lt 10 ]; do found=; case "$g" in ''|*[!0-9]*) ;; *) kill -KILL -$g 2>/dev/null && found=1;; esac; ${tokens}n=$((n+1)); [ -z "$found" ] && [ $n -ge ${MIN_ROUNDS} ] && exit 0; sleep 0.1; done`
  ].join("\n")
}

/** A started watchdog. */
export interface Watchdog {
  /** Hands it the command's process group (`undefined`: the spawn failed); call once, right after the spawn. */
  readonly spawned: (group: number | undefined) => void
  /** Stops it: the command's run is over while the watched process lives. */
  readonly stop: () => void
}

/**
 * Starts a watchdog for the command about to be spawned with environment entry `token`. A failure
 * to start it fails the command's start (`Error`): a command that must die with `parent` never
 * runs without one.
 */
export const start = (parent: Watched, token: string): Watchdog => {
  const child: ChildProcess = spawn("/bin/sh", ["-c", script(parent, token)], {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
  })
  if (child.pid === undefined) {
    throw new Error("could not start the parent watchdog (/bin/sh)")
  }
  child.on("error", () => undefined)
  child.stdin?.on("error", () => undefined)
  child.unref()
  const pid = child.pid
  return {
    spawned: (group) => {
      child.stdin?.end(group === undefined ? "" : `${group}\n`)
    },
    stop: () => {
      child.stdin?.destroy()
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        return
      }
    }
  }
}
