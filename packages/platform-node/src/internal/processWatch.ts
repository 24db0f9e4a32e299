import * as fs from "node:fs"

export interface GroupSample {
  readonly members: number
  readonly rssBytes: number
  readonly userMs: number
  readonly systemMs: number
  readonly leaderCpuMs: number
}

interface MutableSample {
  members: number
  rssBytes: number
  userMs: number
  systemMs: number
  leaderCpuMs: number
}

const TICK_MS = 10
const SNAPSHOT_MAX_AGE_MS = 40

export const procAvailable: boolean = fs.existsSync("/proc/self/stat")

let pageSize: number | undefined
const readPageSize = (): number => {
  try {
    const match = /KernelPageSize:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/smaps", "latin1"))
    return match === null ? 4096 : Number(match[1]) * 1024
  } catch {
    return 4096
  }
}

const statBuffer = Buffer.allocUnsafe(4096)

/** `/proc/<pid>/stat` with open, read and close only (`readFileSync` adds an fstat and a second read). */
const readStat = (pid: string): string | undefined => {
  let fd: number
  try {
    fd = fs.openSync(`/proc/${pid}/stat`, "r")
  } catch {
    return undefined
  }
  try {
    const length = fs.readSync(fd, statBuffer, 0, statBuffer.length, 0)
    return statBuffer.toString("latin1", 0, length)
  } catch {
    return undefined
  } finally {
    fs.closeSync(fd)
  }
}

const addProcess = (groups: Map<number, MutableSample>, pid: number, stat: string, bytesPerPage: number) => {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const pgrp = Number(fields[2])
  const utime = Number(fields[11]) + Number(fields[13])
  const stime = Number(fields[12]) + Number(fields[14])
  const group = groups.get(pgrp) ?? { members: 0, rssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 }
  if (fields[0] !== "Z" && fields[0] !== "X") group.members += 1
  group.rssBytes += Number(fields[21]) * bytesPerPage
  group.userMs += utime * TICK_MS
  group.systemMs += stime * TICK_MS
  if (pid === pgrp) group.leaderCpuMs = (Number(fields[11]) + Number(fields[12])) * TICK_MS
  groups.set(pgrp, group)
}

const scan = (): Map<number, MutableSample> => {
  const bytesPerPage = (pageSize ??= readPageSize())
  const groups = new Map<number, MutableSample>()
  for (const entry of fs.readdirSync("/proc")) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    const stat = readStat(entry)
    if (stat !== undefined) addProcess(groups, Number(entry), stat, bytesPerPage)
  }
  return groups
}

let snapshot: { readonly at: number; readonly groups: Map<number, MutableSample> } | undefined

const EMPTY: GroupSample = { members: 0, rssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 }

export const sampleGroup = (pgid: number, maxAgeMs = SNAPSHOT_MAX_AGE_MS): GroupSample | undefined => {
  if (!procAvailable) return undefined
  const now = performance.now()
  if (snapshot === undefined || now - snapshot.at > maxAgeMs) snapshot = { at: now, groups: scan() }
  return snapshot.groups.get(pgid) ?? EMPTY
}

/**
 * Reads only the leader's /proc entry: right after the start the group is the leader alone, and a full
 * scan of /proc for every short-lived process would cost more than the process itself.
 */
export const sampleLeader = (pid: number): GroupSample | undefined => {
  if (!procAvailable) return undefined
  const stat = readStat(String(pid))
  if (stat === undefined) return EMPTY
  const groups = new Map<number, MutableSample>()
  addProcess(groups, pid, stat, (pageSize ??= readPageSize()))
  return groups.get(pid) ?? EMPTY
}

const groupExists = (pgid: number): boolean => {
  // A missing group is the common answer; its ESRCH error needs no stack trace.
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    process.kill(-pgid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  } finally {
    Error.stackTraceLimit = limit
  }
}

export const isGroupAlive = (pgid: number): boolean => {
  if (!groupExists(pgid)) return false
  return procAvailable ? (sampleGroup(pgid, 0)?.members ?? 0) > 0 : true
}

export const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    return
  }
}
