/**
 * The file protocol between corral and a process agent:
 *
 * - `CORRAL_USAGE_FILE`: JSON lines the process appends (`{"inputTokens":…,"outputTokens":…,"costUsd":…}`),
 *   read by `processUsage.ts`.
 * - `CORRAL_RESULT_FILE`: JSON the process writes; parsed into `ProcessResult.result` on success.
 * - `CORRAL_DEPS_DIR`: a folder with `<dependency-id>.json` for each dependency with a result.
 *
 * The files live in `protocolDir` when the spec names one (kept). Otherwise they are files of this
 * process's private temporary directory named after the run, removed after it: a folder of their own
 * (created, then removed recursively) is made only when the process needs one, for `deps/` or to bind
 * into a sandbox; a `mkdir` and a recursive `rm` per run cost more than a short process's own start.
 * A sandboxed run's folder, left empty by a run whose process tree is gone, serves a later sandboxed
 * run (named after the run that made it).
 *
 * The private directory is removed when this process exits normally; a process killed by a signal
 * leaves it behind. So where /proc exists its name carries its owner — boot, pid namespace, pid and
 * start time (`corral-agents-<boot>-<ns>-<pid>-<start>-XXXXXX`) — and the first process agent of a
 * later process removes, in the background, the private directories whose owner is gone (same boot
 * and pid namespace, and no process with that pid and start time; those of an earlier boot). It
 * never touches one whose owner it cannot judge: another pid namespace, or an untagged name.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type { ProcessSpec } from "../ProcessRunner.ts"
import { startOf } from "./processWatch.ts"
import * as Folder from "../Folder.ts"

export interface Protocol {
  /** The folder of the files; this process's private temporary directory itself when `owned` is `"files"`. */
  readonly dir: string
  /** What the run removes: its own folder, its files in the private directory, or nothing (`protocolDir`). */
  readonly owned: "folder" | "files" | false
  readonly usagePath: string
  readonly resultPath: string
  /** True when the spec named the result file: then a missing file is an error. */
  readonly resultRequired: boolean
  readonly env: Record<string, string>
}

let privateRoot: string | undefined
let counter = 0

const ROOT_PREFIX = "corral-agents-"

/** Who owns a private directory: the first 8 hex digits of the boot id, the pid namespace's inode, pid, start time. */
export interface Owner {
  readonly boot: string
  readonly namespace: string
  readonly pid: number
  readonly start: number
}

/** This process as an owner, or `undefined` where /proc cannot tell. */
export const selfOwner = (): Owner | undefined => {
  try {
    const boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").replace(/-/g, "").slice(0, 8)
    const namespace = /\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))?.[1]
    const start = startOf(process.pid)
    if (!/^[0-9a-f]{8}$/.test(boot) || namespace === undefined || start === undefined) return undefined
    return { boot, namespace, pid: process.pid, start }
  } catch {
    return undefined
  }
}

const tagged = /^corral-agents-([0-9a-f]{8})-(\d+)-(\d+)-(\d+)-[^/]+$/

/** The owner a private directory's name records, if it records one. */
export const ownerOf = (name: string): Owner | undefined => {
  const match = tagged.exec(name)
  if (match === null) return undefined
  return { boot: match[1]!, namespace: match[2]!, pid: Number(match[3]), start: Number(match[4]) }
}

/** Whether a process can tell that `owner` is gone: an earlier boot, or no such process in its own pid namespace. */
const ownerGone = (owner: Owner, self: Owner): boolean =>
  owner.boot !== self.boot || (owner.namespace === self.namespace && startOf(owner.pid) !== owner.start)

/**
 * Removes the private directories in `dir` whose owner is gone (see the module comment); resolves to
 * the names it removed. Errors (a folder of another user, one removed meanwhile) skip that folder.
 */
export const sweepOrphanRoots = async (dir: string, self: Owner): Promise<Array<string>> => {
  let names: Array<string>
  try {
    names = await fsp.readdir(dir)
  } catch {
    return []
  }
  const removed: Array<string> = []
  for (const name of names) {
    if (!name.startsWith(ROOT_PREFIX)) continue
    const owner = ownerOf(name)
    if (owner === undefined || !ownerGone(owner, self)) continue
    try {
      await fsp.rm(path.join(dir, name), { recursive: true, force: true })
      removed.push(name)
    } catch {}
  }
  return removed
}

let sweep: Promise<void> = Promise.resolve()

/** Settles when the background sweep this process's first process agent started has ended. */
export const orphanSweep = (): Promise<void> => sweep

const rootDir = (): string => {
  if (privateRoot === undefined) {
    const tmp = os.tmpdir()
    const self = selfOwner()
    const tag = self === undefined ? "" : `${self.boot}-${self.namespace}-${self.pid}-${self.start}-`
    privateRoot = fs.mkdtempSync(path.join(tmp, `${ROOT_PREFIX}${tag}`))
    const root = privateRoot
    process.once("exit", () => fs.rmSync(root, { recursive: true, force: true }))
    if (self !== undefined) sweep = sweepOrphanRoots(tmp, self).then(() => undefined)
  }
  return privateRoot
}

const safe = (name: string): string => name.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 80)

/**
 * Creates the folder when one is needed (`folder`: the process is sandboxed, so it gets a folder of its
 * own to write in), writes the dependency files and returns the environment for the child.
 */
export const prepare = (spec: ProcessSpec, name: string, cwd: string, folder = false): Protocol => {
  if (spec.protocolDir !== undefined) return prepareIn(spec, path.resolve(cwd, spec.protocolDir), cwd, false)
  if (folder && spec.deps === undefined) {
    const spare = spareFolders.pop()
    if (spare !== undefined) return prepareIn(spec, spare, cwd, "folder", true)
  }
  const base = path.join(rootDir(), `${safe(name)}-${++counter}`)
  if (folder || spec.deps !== undefined) return prepareIn(spec, base, cwd, "folder")
  // Names unique in the private root: no file of an earlier run can be there.
  const usagePath = `${base}.usage.jsonl`
  const resultPath = spec.resultFile === undefined ? `${base}.result.json` : path.resolve(cwd, spec.resultFile)
  return {
    dir: rootDir(),
    owned: "files",
    usagePath,
    resultPath,
    resultRequired: spec.resultFile !== undefined,
    env: { CORRAL_USAGE_FILE: usagePath, CORRAL_RESULT_FILE: resultPath }
  }
}

const prepareIn = (spec: ProcessSpec, dir: string, cwd: string, owned: "folder" | false, spare = false): Protocol => {
  // A folder of our own is new (its name is unique in the private root) or a spare one, found empty
  // after its run's tree was gone, so it holds no old files.
  if (!owned) Folder.makeSync(dir)
  else if (!spare) fs.mkdirSync(dir)
  const usagePath = path.join(dir, "usage.jsonl")
  if (!owned) fs.rmSync(usagePath, { force: true })
  const resultPath = spec.resultFile === undefined ? path.join(dir, "result.json") : path.resolve(cwd, spec.resultFile)
  if (!owned && spec.resultFile === undefined) fs.rmSync(resultPath, { force: true })
  const env: Record<string, string> = { CORRAL_USAGE_FILE: usagePath, CORRAL_RESULT_FILE: resultPath }
  const deps = Object.entries(spec.deps ?? {}).filter(([, value]) => value !== undefined)
  if (spec.deps !== undefined) {
    const depsDir = path.join(dir, "deps")
    fs.rmSync(depsDir, { recursive: true, force: true })
    fs.mkdirSync(depsDir)
    for (const [id, value] of deps) fs.writeFileSync(path.join(depsDir, `${safe(id)}.json`), JSON.stringify(value))
    env.CORRAL_DEPS_DIR = depsDir
  }
  return { dir, owned, usagePath, resultPath, resultRequired: spec.resultFile !== undefined, env }
}

const unlink = (file: string) => fsp.unlink(file).catch(() => undefined)

/**
 * What the run saw once the process's tree was gone (nothing of it writes the files any more): which
 * files were missing, so there is nothing to remove (a failed `unlink` costs an error object per file
 * and run), and whether the whole tree is known gone, so an empty folder of its own can serve the next
 * sandboxed run.
 */
export interface Seen {
  usageMissing: boolean
  resultMissing: boolean
  treeGone: boolean
}

export const nothingSeen = (): Seen => ({ usageMissing: false, resultMissing: false, treeGone: false })

/**
 * Empty protocol folders of finished sandboxed runs whose process tree is gone, for the next sandboxed
 * run: a `mkdir` and a recursive `rm` per run cost more than starting the sandbox on a slow disk.
 */
const spareFolders: Array<string> = []
const SPARE_FOLDERS_MAX = 64

const removeFolder = (dir: string) => fsp.rm(dir, { recursive: true, force: true }).catch(() => undefined)

const isEmpty = (dir: string): boolean => {
  try {
    return fs.readdirSync(dir).length === 0
  } catch {
    return false
  }
}

const releaseFolder = (dir: string, recyclable: boolean): Promise<void> => {
  if (recyclable && spareFolders.length < SPARE_FOLDERS_MAX && isEmpty(dir)) {
    spareFolders.push(dir)
    return Promise.resolve()
  }
  return removeFolder(dir)
}

/**
 * Removes what the run created: its folder (or keeps it, empty, for the next sandboxed run), or its
 * usage file and (unless the spec named it) its result file, skipping the files `seen` missing.
 */
export const cleanup = (protocol: Protocol, spec: ProcessSpec, seen: Seen = nothingSeen()): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (protocol.owned === "folder")
      return Effect.promise(() => releaseFolder(protocol.dir, seen.treeGone && spec.deps === undefined))
    if (protocol.owned === false) return Effect.void
    const files: Array<string> = []
    if (!seen.usageMissing) files.push(protocol.usagePath)
    if (spec.resultFile === undefined && !seen.resultMissing) files.push(protocol.resultPath)
    if (files.length === 0) return Effect.void
    return Effect.promise(() => Promise.all(files.map(unlink)))
  })
