/**
 * Creating a folder and its missing parents (`mkdir -p`) with one `mkdir` per missing folder, from the
 * deepest one that exists down. Not Node's `mkdirSync(dir, { recursive: true })`: it reads ENOENT from
 * `mkdir` as "the parent is missing", creates the parent (EEXIST, a folder) and tries the child again,
 * forever, where a file system answers ENOENT for a new name in an existing folder (procfs:
 * `/proc/self/x`); only SIGKILL stopped it. `fs.promises.mkdir` spins the same way in a thread of
 * libuv's pool, so its promise never settles. Every folder corral creates at a path it is given
 * (protocol and log folders, workspace folders, run records, the cluster remote, the command's state
 * folder) is made here.
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

/**
 * A folder that could not be created: `path` is the one that failed, `reason` says why.
 *
 * @since 0.1.0
 * @category errors
 */
export class FolderError extends Data.TaggedError("FolderError")<{
  readonly path: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.path}: ${this.reason}`
  }
}

const fileInTheWay = (path: string) => new FolderError({ path, reason: "a file is in the way" })

const errorOf = (path: string, error: unknown): FolderError => {
  const code = (error as NodeJS.ErrnoException).code
  if (code === "ENOTDIR" || code === "EEXIST") return fileInTheWay(path)
  if (code === "ENOENT")
    return new FolderError({
      path,
      reason: `${NodePath.dirname(path)} does not let folders be created in it (mkdir: ENOENT)`
    })
  return new FolderError({ path, reason: error instanceof Error ? error.message : String(error) })
}

/** The folders to create, deepest last: `dir` and its parents up to the first that exists. */
const missingFolders = (dir: string): Array<string> => {
  const missing: Array<string> = []
  let current = dir
  for (;;) {
    let stat: NodeFs.Stats | undefined
    try {
      stat = NodeFs.statSync(current, { throwIfNoEntry: false })
    } catch (error) {
      throw errorOf(current, error)
    }
    if (stat !== undefined) {
      if (!stat.isDirectory()) throw fileInTheWay(current)
      return missing.reverse()
    }
    missing.push(current)
    const parent = NodePath.dirname(current)
    if (parent === current) return missing.reverse()
    current = parent
  }
}

const create = (folder: string, mode: number | undefined): void => {
  try {
    NodeFs.mkdirSync(folder, mode)
  } catch (error) {
    // Created meanwhile by another process: fine when it is a folder.
    if ((error as NodeJS.ErrnoException).code === "EEXIST" && NodeFs.statSync(folder).isDirectory()) return
    throw errorOf(folder, error)
  }
}

/**
 * Creates `dir` and its missing parents (with `mode`, like `mkdir`'s, when given); an existing folder
 * is left as it is. Throws a {@link FolderError}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSync = (dir: string, mode?: number): void => {
  try {
    for (const folder of missingFolders(NodePath.resolve(dir))) create(folder, mode)
  } catch (error) {
    throw error instanceof FolderError ? error : errorOf(dir, error)
  }
}

/**
 * Creates `dir` and its missing parents; an existing folder is left as it is.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (dir: string, mode?: number): Effect.Effect<void, FolderError> =>
  Effect.try({
    try: () => makeSync(dir, mode),
    catch: (error) => (error instanceof FolderError ? error : errorOf(dir, error))
  })
