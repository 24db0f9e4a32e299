import { execFile } from "node:child_process"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import { DiskFull } from "./git.ts"
import { WorkspaceIoError } from "./workspaceErrors.ts"
import * as Folder from "../Folder.ts"

export type FsFailure = WorkspaceIoError | DiskFull

export const attempt = <A>(operation: string, target: string, run: () => Promise<A>): Effect.Effect<A, FsFailure> =>
  Effect.tryPromise({
    try: run,
    catch: (cause) =>
      (cause as NodeJS.ErrnoException)?.code === "ENOSPC"
        ? new DiskFull({ path: target, detail: String((cause as Error).message) })
        : new WorkspaceIoError({ path: target, operation, cause })
  })

export const makeDir = (dir: string) => attempt("create folder", dir, async () => Folder.makeSync(dir))

export const removePath = (target: string) =>
  attempt("remove", target, () => fs.rm(target, { recursive: true, force: true, maxRetries: 3 }))

export const writeText = (file: string, text: string) =>
  attempt("write", file, async () => {
    Folder.makeSync(path.dirname(file))
    const temp = `${file}.${process.pid}.tmp`
    await fs.writeFile(temp, text)
    await fs.rename(temp, file)
  })

export const readTextOrUndefined = (file: string) =>
  attempt("read", file, () => fs.readFile(file, "utf8").catch(() => undefined))

export const exists = (target: string) =>
  Effect.promise(() =>
    fs.access(target).then(
      () => true,
      () => false
    )
  )

export const listDir = (dir: string) =>
  Effect.promise(() => fs.readdir(dir, { withFileTypes: true }).catch(() => [])).pipe(
    Effect.map((entries) => entries.map((entry) => ({ name: entry.name, isDirectory: entry.isDirectory() })))
  )

export const copyFile = (from: string, to: string) =>
  attempt("copy file to", to, async () => {
    Folder.makeSync(path.dirname(to))
    await fs.cp(from, to, { recursive: true, force: true, preserveTimestamps: true })
  })

const cpReflink = (sources: ReadonlyArray<string>, dest: string) =>
  new Promise<boolean>((resolve) =>
    execFile("cp", ["--reflink=auto", "-a", ...sources, `${dest}/`], (error) => resolve(error === null))
  )

export const copyTree = (source: string, dest: string, skip: ReadonlyArray<string>) =>
  attempt("copy folder to", dest, async () => {
    Folder.makeSync(dest)
    const names = (await fs.readdir(source)).filter((name) => !skip.includes(name))
    const sources = names.map((name) => path.join(source, name))
    if (sources.length === 0 || (await cpReflink(sources, dest))) return
    for (const from of sources)
      await fs.cp(from, path.join(dest, path.basename(from)), { recursive: true, preserveTimestamps: true })
  })

export interface TreeStamp {
  readonly files: number
  readonly newestMtimeMs: number
}

export const stampTree = (dir: string) =>
  attempt("scan", dir, async () => {
    let files = 0
    let newestMtimeMs = 0
    for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue
      files++
      const stat = await fs.stat(path.join(entry.parentPath, entry.name))
      newestMtimeMs = Math.max(newestMtimeMs, stat.mtimeMs)
    }
    return { files, newestMtimeMs } satisfies TreeStamp
  })

export const isPidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * When process `pid` started, as Linux gives it (`/proc/<pid>/stat` field 22, clock ticks since
 * boot), or `undefined` where that cannot be read: with the pid it names one process, so a pid
 * reused by a later process does not match it.
 */
export const processStart = (pid: number): string | undefined => {
  try {
    const stat = fsSync.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}
