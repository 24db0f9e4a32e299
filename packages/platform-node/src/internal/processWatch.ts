import * as fs from "node:fs"
import { sharedHelper } from "./spawnHelper.ts"

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

/** This process's pid: `process.pid` is a system call on every read. */
const ownPid = process.pid

let pageSize: number | undefined
/** From the first mappings of `smaps`, in one read (the whole file of a CLI process is ≈ 200 KB, ≈ 14 ms of CPU). */
const readPageSize = (): number => {
  const match = /KernelPageSize:\s+(\d+) kB/.exec(readProc("/proc/self/smaps") ?? "")
  return match === null ? 4096 : Number(match[1]) * 1024
}

let procBuffer = Buffer.allocUnsafe(4096)

/**
 * A /proc file with open, read and close only (`readFileSync` adds an fstat and more reads), into
 * `procBuffer`; its length, or `undefined` when it cannot be read. `whole`: read until the end (an
 * environment can be longer than the buffer, which then grows); otherwise one read, for files the
 * kernel produces in one piece far below the buffer's size (`stat`, `loadavg`), so the read that would
 * find the end is saved.
 */
const readProcBytes = (file: string, whole = false): number | undefined => {
  let fd: number
  try {
    fd = fs.openSync(file, "r")
  } catch {
    return undefined
  }
  try {
    let length = 0
    for (;;) {
      const read = fs.readSync(fd, procBuffer, length, procBuffer.length - length, length)
      length += read
      if (read === 0 || !whole) break
      if (length === procBuffer.length) {
        const larger = Buffer.allocUnsafe(procBuffer.length * 2)
        procBuffer.copy(larger)
        procBuffer = larger
      }
    }
    return length
  } catch {
    return undefined
  } finally {
    fs.closeSync(fd)
  }
}

const readProc = (file: string, whole = false): string | undefined => {
  const length = readProcBytes(file, whole)
  return length === undefined ? undefined : procBuffer.toString("latin1", 0, length)
}

/**
 * The fields of the last `stat` read by `readStat`, numbered after the command name as in proc(5)
 * minus 3: `[0]` the state letter's code, `[1]` ppid, `[2]` pgrp, `[3]` session, `[6]` flags,
 * `[11]`–`[14]` utime, stime, cutime, cstime (ticks), `[19]` start time (ticks since boot), `[21]`
 * rss (pages); read up to `ENV_END` on request: `[24]` end of the program's code, `[47]`–`[48]` start
 * and end of its environment (addresses).
 */
const STAT_FIELDS = 22
const FLAGS = 6
const END_CODE = 24
const ENV_START = 47
const ENV_END = 48
const stat = new Float64Array(ENV_END + 1)

/**
 * Reads `/proc/<pid>/stat` into `stat`, its first `fields` fields, parsing the bytes in place: a scan
 * reads one per process of the machine every 100 ms, and a string split into its 52 fields was most
 * of what it allocated per process.
 */
const readStat = (pid: string, fields = STAT_FIELDS): boolean => {
  const length = readProcBytes(`/proc/${pid}/stat`)
  if (length === undefined || length === 0) return false
  // The command name is in parentheses and may contain anything, so fields start after the last ")".
  let at = procBuffer.lastIndexOf(0x29, length - 1) + 2
  if (at < 2 || at >= length) return false
  stat[0] = procBuffer[at]!
  at += 1
  for (let field = 1; field < fields; field++) {
    if (at >= length || procBuffer[at] !== 0x20) return false
    at += 1
    const negative = procBuffer[at] === 0x2d
    if (negative) at += 1
    let value = 0
    for (let byte = procBuffer[at]!; at < length && byte >= 0x30 && byte <= 0x39; byte = procBuffer[++at]!) {
      value = value * 10 + (byte - 0x30)
    }
    stat[field] = negative ? -value : value
  }
  return true
}

const ZOMBIE = 0x5a
const DEAD = 0x58

/** One process of a /proc scan: enough to walk a tree by parent pid and to tell a reused pid apart. */
export interface ProcEntry {
  readonly pid: number
  readonly ppid: number
  readonly pgrp: number
  /** Session id: a process stays in its session unless it calls `setsid`, which makes a new one. */
  readonly sid: number
  /** Start time in clock ticks since boot (`/proc/<pid>/stat` field 22). */
  readonly start: number
  readonly alive: boolean
}

/** Adds the process whose `stat` was read last (`readStat`) to its group's sample and to `entries`. */
const addProcess = (
  groups: Map<number, MutableSample>,
  pid: number,
  bytesPerPage: number,
  entries?: Array<ProcEntry>
) => {
  const pgrp = stat[2]!
  const alive = stat[0] !== ZOMBIE && stat[0] !== DEAD
  entries?.push({ pid, ppid: stat[1]!, pgrp, sid: stat[3]!, start: stat[19]!, alive })
  const group = groups.get(pgrp) ?? { members: 0, rssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 }
  if (alive) group.members += 1
  group.rssBytes += stat[21]! * bytesPerPage
  group.userMs += (stat[11]! + stat[13]!) * TICK_MS
  group.systemMs += (stat[12]! + stat[14]!) * TICK_MS
  if (pid === pgrp) group.leaderCpuMs = (stat[11]! + stat[12]!) * TICK_MS
  groups.set(pgrp, group)
}

interface Snapshot {
  readonly at: number
  readonly groups: Map<number, MutableSample>
  readonly entries: ReadonlyArray<ProcEntry>
}

const scan = (): Snapshot => {
  const bytesPerPage = (pageSize ??= readPageSize())
  const groups = new Map<number, MutableSample>()
  const entries: Array<ProcEntry> = []
  for (const entry of fs.readdirSync("/proc")) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    if (readStat(entry)) addProcess(groups, Number(entry), bytesPerPage, entries)
  }
  return { at: performance.now(), groups, entries }
}

let snapshot: Snapshot | undefined

const EMPTY: GroupSample = { members: 0, rssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 }

export const sampleGroup = (pgid: number, maxAgeMs = SNAPSHOT_MAX_AGE_MS): GroupSample | undefined => {
  if (!procAvailable) return undefined
  const now = performance.now()
  if (snapshot === undefined || now - snapshot.at > maxAgeMs) snapshot = scan()
  return snapshot.groups.get(pgid) ?? EMPTY
}

/**
 * The processes of an agent's tree that left its process group (`setsid`, `setpgid`, a double fork,
 * `nohup … &` under a shell that gives jobs their own group), by pid and start time.
 *
 * - `track` (every watchdog sample) adds the descendants, by parent pid, of the group's members and
 *   of the processes already tracked;
 * - `collect` (at stop time, on a fresh scan) does the same, and adds processes started since the
 *   agent that are in its session (the leader starts a new one, so only its descendants are in it) or
 *   carry its `token` in their environment: a process whose parent exited between two samples was
 *   re-parented to init, but it still has the environment it inherited. Environments are read once
 *   per process (by pid and start time) for all agents, and never for processes this process started
 *   itself or that are in its own session or another agent's (`launchedLeader`). The scan reads
 *   every process started since the leader, so it also tells whether the group still has a live
 *   member (`groupAlive`: every member descends from the leader); told that the leader was reaped
 *   (its exit was seen), it does not read the leader's pid within `YOUNG_MS` of the start.
 *
 * A process that left the session before the first sample reached it and cleared its environment is
 * not found. One whose environment reads empty because an `exec` is replacing it is counted in
 * `unsettled` until a later scan reads the new program's.
 */
const YOUNG_MS = 2000
const DIRECT_PIDS_MAX = 16

export class Strays {
  private readonly known = new Map<number, number>()
  private readonly pgid: number
  private readonly token: string
  /**
   * The leader's start time, from the first sample within `YOUNG_MS` of the start that saw it (the
   * leader is not read at the start: see `watchdog` in `processRun.ts`); 0 until then, or for good
   * when none did. Processes started before it are not read; with 0 none is left out by age, which
   * costs reads but finds nothing more: a pid still in use as a group or session id is not handed out
   * again, a live process's parent pid is that of a live process, and the token is the agent's own.
   */
  private since = 0
  private readonly startedAt = performance.now()
  /** Whether the last `collect` saw a live member of the group (true until the first one). */
  groupAlive = true
  /**
   * How many processes the last `collect` could not tell apart: their environment read empty while an
   * `exec` replaced it (`environmentOf`). A later `collect` tells.
   */
  unsettled = 0

  constructor(pgid: number, token: string) {
    this.pgid = pgid
    this.token = token
  }

  /** Adds the out-of-group descendants seen in the latest scan. */
  track(): void {
    if (snapshot === undefined) return
    if (this.since === 0 && performance.now() - this.startedAt < YOUNG_MS) {
      this.since = snapshot.entries.find((entry) => entry.pid === this.pgid)?.start ?? 0
    }
    this.walk(snapshot.entries)
  }

  /** Every live process of the tree outside the group, from a fresh scan of the processes started since. */
  collect(leaderReaped = false): ReadonlyArray<ProcEntry> {
    if (!procAvailable) return []
    // Within a few seconds of the start, pids cannot have wrapped all the way around (that takes
    // pid_max forks); later, every process is read.
    const young = performance.now() - this.startedAt < YOUNG_MS
    // The leader's pid is not read once it was reaped: no other process can have it that soon.
    const entries = scanSince(this.pgid, young ? lastPid() : undefined, young && leaderReaped)
    this.walk(entries)
    this.groupAlive = false
    this.unsettled = 0
    const own = ownSession()
    const helperPid = sharedHelper().pid ?? -1
    for (const entry of entries) {
      if (entry.start < this.since) continue
      if (entry.pgrp === this.pgid) this.groupAlive ||= entry.alive
      if (entry.pgrp === this.pgid || this.known.has(entry.pid)) continue
      if (entry.pid === ownPid || !entry.alive) continue
      // The leader made a new session, so everything in it descends from the leader.
      if (entry.sid === this.pgid) this.known.set(entry.pid, entry.start)
      // Not ours: started by this process itself or by its spawn helper (a leader, or a helper in its
      // session); neither is a subreaper, so an escaped process is never re-parented to them.
      else if (entry.ppid === ownPid || entry.ppid === helperPid || entry.sid === own) continue
      // In another agent's session: a process cannot join a session it did not make, so it is not ours.
      else if (isLaunchedLeader(entry.sid)) continue
      else {
        const tokens = tokensOf(entry)
        if (tokens === undefined) this.unsettled += 1
        else if (tokens.includes(this.token)) this.known.set(entry.pid, entry.start)
      }
    }
    this.walk(entries)
    return entries.filter((entry) => entry.alive && this.known.get(entry.pid) === entry.start)
  }

  private walk(entries: ReadonlyArray<ProcEntry>): void {
    const parents = new Set<number>()
    for (const entry of entries) {
      if (entry.pgrp === this.pgid || this.known.get(entry.pid) === entry.start) parents.add(entry.pid)
    }
    let grew = true
    while (grew) {
      grew = false
      for (const entry of entries) {
        if (parents.has(entry.pid) || !parents.has(entry.ppid) || entry.start < this.since) continue
        parents.add(entry.pid)
        if (entry.pgrp !== this.pgid && entry.pid !== ownPid) this.known.set(entry.pid, entry.start)
        grew = true
      }
    }
  }
}

/**
 * Leaders of process agents this process started (through its spawn helper or itself) at most 2 seconds
 * ago, in two generations of up to 2/3 s each (kept only while younger than 4/3 s, then used for up to
 * 2/3 s more). Each is the leader of a session of its own whose
 * parent is the helper or this process, so it is never a stray of another agent: the stray walk at an
 * agent's exit does not read them (at concurrency N, most pids handed out during a short agent are
 * the other agents' leaders). Two seconds is the span `YOUNG_MS` already trusts pids not to wrap around in.
 */
let launched = new Set<number>()
let launchedBefore = new Set<number>()
let launchedSince = 0

const LAUNCHED_GENERATION_MS = YOUNG_MS / 3

const rotateLaunched = (now: number) => {
  if (now - launchedSince < LAUNCHED_GENERATION_MS) return
  launchedBefore = now - launchedSince < 2 * LAUNCHED_GENERATION_MS ? launched : new Set()
  launched = new Set()
  launchedSince = now
}

/** Records that this process started `pid` as an agent's leader just now. */
export const launchedLeader = (pid: number): void => {
  rotateLaunched(performance.now())
  launched.add(pid)
}

const isLaunchedLeader = (pid: number): boolean => {
  rotateLaunched(performance.now())
  return launched.has(pid) || launchedBefore.has(pid)
}

/** The pid most recently handed out (`/proc/loadavg`), or `undefined` when it cannot be read. */
const lastPid = (): number | undefined => {
  const length = readProcBytes("/proc/loadavg")
  if (length === undefined) return undefined
  // The last field: "0.71 0.97 1.24 2/345 12345\n".
  let end = length
  while (end > 0 && !isDigit(procBuffer[end - 1]!)) end--
  let at = end
  while (at > 0 && isDigit(procBuffer[at - 1]!)) at--
  let last = 0
  for (let i = at; i < end; i++) last = last * 10 + (procBuffer[i]! - 0x30)
  return at < end && procBuffer[at - 1] === 0x20 && last > 0 ? last : undefined
}

const isDigit = (byte: number): boolean => byte >= 0x30 && byte <= 0x39

let ownSid: number | undefined
/** The session of this process (it never changes: Node does not call `setsid`). */
const ownSession = (): number => (ownSid ??= readStat("self") ? stat[3]! : -1)

/** Whether `pid` was handed out after `first` and up to `last`, numbering wrapping around once at most. */
const between = (pid: number, first: number, last: number): boolean =>
  first <= last ? pid >= first && pid <= last : pid >= first || pid <= last

/**
 * The processes started since the one with pid `first` when the pids handed out since then are known
 * (`last`: pids are handed out in increasing order, wrapping around at `pid_max`), else all of them.
 * A stat read per process of the machine at every exit would cost more than a short process itself.
 * When few pids were handed out since, each is read directly: a missing one costs one failed `open`,
 * less than listing /proc (a string per process of the machine). `skipFirst`: the process `first` was
 * reaped, so its pid is not read.
 */
const scanSince = (first: number, last: number | undefined, skipFirst = false): Array<ProcEntry> => {
  const bytesPerPage = (pageSize ??= readPageSize())
  const groups = new Map<number, MutableSample>()
  const entries: Array<ProcEntry> = []
  const add = (pid: number, name: string) => {
    if (pid === first ? skipFirst : isLaunchedLeader(pid)) return
    if (readStat(name)) addProcess(groups, pid, bytesPerPage, entries)
  }
  if (last !== undefined && first <= last && last - first < DIRECT_PIDS_MAX) {
    // A pid that is gone is the common answer; its ENOENT error needs no stack trace.
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      for (let pid = skipFirst ? first + 1 : first; pid <= last; pid++) add(pid, String(pid))
    } finally {
      Error.stackTraceLimit = limit
    }
    return entries
  }
  for (const entry of fs.readdirSync("/proc")) {
    const code = entry.charCodeAt(0)
    if (code < 48 || code > 57) continue
    const pid = Number(entry)
    if (last === undefined || between(pid, first, last)) add(pid, entry)
  }
  return entries
}

/** The start time of process `pid` (`/proc/<pid>/stat` field 22), or `undefined` when it cannot be read. */
export const startOf = (pid: number): number | undefined => (readStat(String(pid)) ? stat[19] : undefined)

const TOKEN_NAME = "CORRAL_PROCESS_TOKEN="
const TOKEN_CACHE_MAX = 4096

/**
 * The `CORRAL_PROCESS_TOKEN=…` entries of a process's environment, by pid and start time. The
 * environment /proc shows is the one the process was started with, so one read serves every agent that
 * looks at the same process (a machine's other processes are seen by every agent that ends).
 */
const tokenCache = new Map<number, { readonly start: number; readonly tokens: ReadonlyArray<string> }>()

/** `undefined`: the environment read empty while an `exec` replaced it (`environmentOf`), not known yet. */
const tokensOf = (entry: ProcEntry): ReadonlyArray<string> | undefined => {
  const cached = tokenCache.get(entry.pid)
  if (cached !== undefined && cached.start === entry.start) return cached.tokens
  const environ = environmentOf(entry.pid)
  if (environ === EXEC) return undefined
  const tokens: Array<string> = []
  for (let at = environ?.indexOf(TOKEN_NAME) ?? -1; at !== -1; at = environ!.indexOf(TOKEN_NAME, at + 1)) {
    if (at > 0 && environ!.charCodeAt(at - 1) !== 0) continue
    const end = environ!.indexOf("\0", at)
    tokens.push(environ!.slice(at, end === -1 ? undefined : end))
  }
  // An unreadable environment (the process just exited, or another user's) is read again next time.
  if (environ === undefined) return tokens
  if (tokenCache.size >= TOKEN_CACHE_MAX) tokenCache.clear()
  tokenCache.set(entry.pid, { start: entry.start, tokens })
  return tokens
}

const EXEC = Symbol("exec")
const PF_KTHREAD = 0x200000

/**
 * The environment of process `pid`; `undefined` when it cannot be read (gone, or another user's);
 * `EXEC` when it read empty while an `exec` replaced it. From the kernel's `exec` replacing the
 * memory until the new program's environment is set up, `/proc/<pid>/environ` reads empty (0 bytes),
 * as it does for a process whose environment is empty (`env -i`); the `stat` read after it tells
 * which: the kernel records the program's end of code after its environment, so `stat` shows 0 for
 * the end of code while an exec is under way (and 0 for the environment's end until it is set up).
 * A kernel thread (flag `PF_KTHREAD`) has no environment.
 */
const environmentOf = (pid: number): string | undefined | typeof EXEC => {
  const file = `/proc/${pid}/environ`
  let length = readProcBytes(file, true)
  if (length === 0) {
    if (!readStat(String(pid), ENV_END + 1) || stat[0] === ZOMBIE || stat[0] === DEAD) return undefined
    if ((stat[FLAGS]! & PF_KTHREAD) !== 0) return ""
    if (stat[END_CODE] === 0 || stat[ENV_END] === 0) return EXEC
    // The exec ended between the two reads: its environment is set up now.
    if (stat[ENV_END]! > stat[ENV_START]!) length = readProcBytes(file, true)
    if (length === 0 && stat[ENV_END]! > stat[ENV_START]!) return EXEC
  }
  return length === undefined ? undefined : procBuffer.toString("latin1", 0, length)
}

/** Forgets the environments read so far: each process's is read again (for tests). */
export const forgetEnvironments = (): void => tokenCache.clear()

/** Signals a stray and, when it leads a process group of its own, that group. */
export const signalStray = (entry: ProcEntry, signal: NodeJS.Signals): void => {
  try {
    if (entry.pgrp === entry.pid) process.kill(-entry.pid, signal)
    else process.kill(entry.pid, signal)
  } catch {
    return
  }
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
