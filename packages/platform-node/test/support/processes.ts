import { readdirSync, readFileSync } from "node:fs"

/**
 * What the tests of every package (and the end-to-end tests) read about a process from `/proc`.
 *
 * A killed process stays in the table as a zombie (state `Z`) until its parent reaps it; one whose
 * parent died first waits for PID 1, which in a container may reap lazily or never. `process.kill(pid, 0)`
 * succeeds on a zombie, so a test that waits for a process to die with `kill(pid, 0)` can wait forever:
 * these helpers count a zombie as gone.
 */

/** The fields of `/proc/<pid>/stat` after the command name: `[state, ppid, pgrp, …]`; undefined once gone. */
const statFields = (pid: number | string): Array<string> | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** The process's state letter (`R`, `S`, `T`, `Z`…), or undefined once it is gone from the table. */
export const stateOf = (pid: number): string | undefined => statFields(pid)?.[0]

/** Whether `pid` is a process that still runs: neither gone nor a zombie. */
export const isAlive = (pid: number): boolean => {
  const state = stateOf(pid)
  return state !== undefined && state !== "Z"
}

/** The parent of `pid`, or undefined once it is gone. */
export const parentOf = (pid: number): number | undefined => {
  const fields = statFields(pid)
  return fields === undefined ? undefined : Number(fields[1])
}

/** The process group of `pid`, or undefined once it is gone. */
export const groupOf = (pid: number): number | undefined => {
  const fields = statFields(pid)
  return fields === undefined ? undefined : Number(fields[2])
}

/** How many live (not zombie) processes are in process group `pgid`. */
export const liveGroupMembers = (pgid: number): number =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      const fields = statFields(entry)
      return fields !== undefined && Number(fields[2]) === pgid && fields[0] !== "Z"
    }).length
