/**
 * Finding executables: whether a path names an executable regular file (a `stat` that throws
 * nothing first, since most candidates — PATH entries, bubblewrap locations — do not exist and a
 * failing `accessSync` costs an exception with a stack trace), and finders for the tools corral
 * starts itself (bubblewrap, unshare).
 */
import * as fs from "node:fs"
import * as path from "node:path"

export const isExecutable = (file: string): boolean => {
  try {
    if (fs.statSync(file, { throwIfNoEntry: false })?.isFile() !== true) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * A finder for the tool `name`: the file the environment variable `variable` names, otherwise the
 * first executable `name` in PATH. The last one found is checked first (one `stat`) while the two
 * variables are unchanged.
 */
export const toolFinder = (variable: string, name: string) => {
  let lastFound: { readonly key: string; readonly file: string } | undefined
  return (env: NodeJS.ProcessEnv = process.env): string | undefined => {
    const named = env[variable]
    const key = `${named ?? ""}\0${env.PATH ?? ""}`
    if (lastFound?.key === key && fs.statSync(lastFound.file, { throwIfNoEntry: false })?.isFile() === true)
      return lastFound.file
    const candidates =
      named !== undefined ? [named] : (env.PATH ?? "").split(path.delimiter).map((dir) => path.join(dir, name))
    const file = candidates.find(isExecutable)
    if (file !== undefined) lastFound = { key, file }
    return file
  }
}
