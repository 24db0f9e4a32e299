import * as fs from "node:fs"

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

/** CPU time of this process (every thread), in ms. */
export const ownCpuMs = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

/** Runs `body` and reports the CPU time it cost this process and the children it reaped. */
export const cpuOf = async <A>(
  body: () => Promise<A>
): Promise<{ readonly value: A; readonly ownMs: number; readonly childrenMs: number }> => {
  const own = ownCpuMs()
  const children = childrenCpuMs() ?? 0
  const value = await body()
  return { value, ownMs: ownCpuMs() - own, childrenMs: (childrenCpuMs() ?? 0) - children }
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
