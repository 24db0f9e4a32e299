/**
 * Limits enforced while a process group runs, besides the memory watchdog: a CPU share (a duty cycle of
 * SIGSTOP/SIGCONT, the method of `cpulimit`, because cgroups are not ours to create) and a disk quota
 * (a periodic walk of the process's folders, because Linux has no per-folder quota without a
 * dedicated file system).
 *
 * CPU throttle, per 100 ms tick: `credit += share × elapsed − cpu used`, capped at one tick's share;
 * while the credit is negative the group is stopped for `−credit / share` ms, then continued. So the
 * group's CPU time stays within `share × wall time + one tick`.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type { ProcessSpec } from "../ProcessRunner.ts"
import type { Breach } from "./processExit.ts"
import { sampleGroup, signalGroup } from "./processWatch.ts"

const TICK_MS = 100
const DISK_INTERVAL_MS = 500

const groupCpuMs = (pgid: number): number | undefined => {
  const sample = sampleGroup(pgid)
  return sample === undefined || sample.members === 0 ? undefined : sample.userMs + sample.systemMs
}

/** Keeps the group's CPU time within `percent` of one core; SIGCONT when interrupted. */
export const cpuThrottle = (pgid: number, percent: number): Effect.Effect<void> => {
  const share = Math.min(100, Math.max(1, percent)) / 100
  let stopped = false
  const resume = () => {
    if (stopped) signalGroup(pgid, "SIGCONT")
    stopped = false
  }
  const loop = Effect.gen(function* () {
    let credit = share * TICK_MS
    let lastCpu = groupCpuMs(pgid) ?? 0
    let lastAt = performance.now()
    while (true) {
      yield* Effect.sleep(TICK_MS)
      const cpu = groupCpuMs(pgid)
      if (cpu === undefined) return
      const now = performance.now()
      credit = Math.min(share * TICK_MS, credit + share * (now - lastAt) - Math.max(0, cpu - lastCpu))
      lastCpu = cpu
      lastAt = now
      if (credit >= 0) continue
      const pause = -credit / share
      signalGroup(pgid, "SIGSTOP")
      stopped = true
      yield* Effect.sleep(pause)
      resume()
      credit += share * (performance.now() - lastAt)
      lastAt = performance.now()
    }
  })
  return Effect.ensuring(loop, Effect.sync(resume))
}

const sizeOf = async (dir: string): Promise<number> => {
  let total = 0
  const entries = await fsp.readdir(dir, { withFileTypes: true }).catch(() => [])
  for (const entry of entries) {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) total += await sizeOf(file)
    else {
      const stat = await fsp.lstat(file).catch(() => undefined)
      if (stat !== undefined) total += stat.blocks * 512
    }
  }
  return total
}

/** Bytes allocated under the folders (a `.git` file or folder of a worktree counts too). */
export const diskUsage = (dirs: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.promise(async () => {
    let total = 0
    for (const dir of new Set(dirs)) total += await sizeOf(dir)
    return total
  })

export const overDisk = (bytes: number, limitMb: number): Breach | undefined =>
  bytes > limitMb * 1024 * 1024
    ? { limit: "diskMb", value: limitMb, detail: `${Math.round(bytes / (1024 * 1024))} MB used` }
    : undefined

const diskDirs = (spec: ProcessSpec, cwd: string): ReadonlyArray<string> => [cwd, ...(spec.privateDirs ?? [])]

/** Measures the folders every 500 ms (or 4× the last walk's time, if longer); calls `onBreach` once, with the measured size, when over `limitMb`. */
export const diskWatchdog = (
  dirs: ReadonlyArray<string>,
  limitMb: number,
  onBreach: (breach: Breach) => void
): Effect.Effect<void> =>
  Effect.gen(function* () {
    let pause = DISK_INTERVAL_MS
    while (true) {
      yield* Effect.sleep(pause)
      const started = performance.now()
      const breach = overDisk(yield* diskUsage(dirs), limitMb)
      if (breach !== undefined) return onBreach(breach)
      // A large tree (a worktree with node_modules) is walked less often: at most a fifth of the time.
      pause = Math.max(DISK_INTERVAL_MS, 4 * (performance.now() - started))
    }
  })

/** The hook of the process runner: the CPU throttle and the disk watchdog the spec's limits ask for. */
export const guards = (pgid: number, spec: ProcessSpec, cwd: string, onBreach: (breach: Breach) => void) => {
  const { cpuPercent, diskMb } = spec.limits ?? {}
  const running: Array<Effect.Effect<void>> = []
  if (cpuPercent !== undefined) running.push(cpuThrottle(pgid, cpuPercent))
  if (diskMb !== undefined) running.push(diskWatchdog(diskDirs(spec, cwd), diskMb, onBreach))
  return Effect.asVoid(Effect.all(running, { concurrency: "unbounded" }))
}

/** The disk limit checked once more after the exit, so a process cannot finish over it between two samples. */
export const finalDiskCheck = (spec: ProcessSpec, cwd: string): Effect.Effect<Breach | undefined> => {
  const diskMb = spec.limits?.diskMb
  return diskMb === undefined
    ? Effect.succeed(undefined)
    : Effect.map(diskUsage(diskDirs(spec, cwd)), (bytes) => overDisk(bytes, diskMb))
}
