import * as fs from "node:fs"
import type { Approach } from "../types.ts"

/**
 * CPU time of the processes this one started and waited for, in ms: `cutime + cstime` of
 * `/proc/self/stat` (a reaped child's CPU includes that of the descendants it waited for). Clock
 * ticks of 10 ms; `undefined` without /proc.
 */
export const childrenCpuMs = (): number | undefined => {
  try {
    const stat = fs.readFileSync("/proc/self/stat", "latin1")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[13]) + Number(fields[14])) * 10
  } catch {
    return undefined
  }
}

/**
 * CPU time of this process's children that are still running, with that of the children they reaped
 * (`utime + stime + cutime + cstime`), in ms: the spawn helper that starts process agents and git
 * commands lives as long as this process, so what it and its children used is not in `cutime` yet.
 */
export const liveChildrenCpuMs = (): number => {
  let total = 0
  let entries: Array<string>
  try {
    entries = fs.readdirSync("/proc")
  } catch {
    return 0
  }
  for (const entry of entries) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    let stat: string
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, "latin1")
    } catch {
      continue
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(fields[1]) !== process.pid) continue
    total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10
  }
  return total
}

/** CPU time of this process (every thread), in ms. */
export const ownCpuMs = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

/** Runs `body` and reports the CPU time it cost this process and its children (reaped, or still running). */
export const cpuOf = async <A>(
  body: () => Promise<A>
): Promise<{ readonly value: A; readonly ownMs: number; readonly childrenMs: number }> => {
  const own = ownCpuMs()
  const children = (childrenCpuMs() ?? 0) + liveChildrenCpuMs()
  const value = await body()
  return { value, ownMs: ownCpuMs() - own, childrenMs: (childrenCpuMs() ?? 0) + liveChildrenCpuMs() - children }
}

/**
 * Runs `body` and reports its wall time, with the CPU it cost per process started: this process's
 * (`cpuMsPerProcess`, where `spawn()` blocks the main thread) and that of the whole tree
 * (`treeCpuMsPerProcess`, this process plus the children it reaped).
 */
export const timedPerProcess = async (
  processes: number,
  body: () => Promise<unknown>
): Promise<{ readonly ms: number; readonly metrics: Record<string, number> }> => {
  const start = performance.now()
  const { ownMs, childrenMs } = await cpuOf(body)
  const ms = performance.now() - start
  return {
    ms,
    metrics: { cpuMsPerProcess: ownMs / processes, treeCpuMsPerProcess: (ownMs + childrenMs) / processes }
  }
}

/** Columns for the metrics of `timedPerProcess`. */
export const perProcessColumns = [
  { key: "cpuMsPerProcess", label: "CPU ms/process (this process)", format: (v: number) => v.toFixed(2) },
  { key: "treeCpuMsPerProcess", label: "CPU ms/process (tree)", format: (v: number) => v.toFixed(2) }
]

/**
 * `approach` with the CPU time each run cost this process (`process.cpuUsage()`, every thread) added
 * to its sample as `cpuMs`: for waiting work, the CPU spent between timers is what delays them.
 */
export const withCpu = <P>(approach: Approach<P>): Approach<P> => ({
  name: approach.name,
  run: async (params, context) => {
    const before = ownCpuMs()
    const sample = await approach.run(params, context)
    return { ...sample, metrics: { ...sample.metrics, cpuMs: ownCpuMs() - before } }
  }
})

/** The column for `withCpu`'s metric. */
export const cpuColumn = { key: "cpuMs", label: "CPU", format: (v: number) => `${v.toFixed(1)} ms` }

/** User + system CPU time of process `pid` so far, in ms (`/proc/<pid>/stat`, ticks of 10 ms); 0 once it is gone. */
export const processCpuMs = (pid: number): number => {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return 0
  }
}

/** The pids of the live processes whose parent is `pid` (e.g. a Postgres server's backends). */
export const childrenOf = (pid: number): Array<number> => {
  try {
    return fs
      .readdirSync("/proc")
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number)
      .filter((child) => {
        try {
          return Number(fs.readFileSync(`/proc/${child}/stat`, "utf8").split(") ")[1]!.split(" ")[1]) === pid
        } catch {
          return false
        }
      })
  } catch {
    return []
  }
}
