/**
 * Whether a path names an executable regular file: a `stat` that throws nothing first, since most
 * candidates (PATH entries, bubblewrap locations) do not exist and a failing `accessSync` costs an
 * exception with a stack trace.
 */
import * as fs from "node:fs"

export const isExecutable = (file: string): boolean => {
  try {
    if (fs.statSync(file, { throwIfNoEntry: false })?.isFile() !== true) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}
