import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/**
 * Runs `f` in a new folder under the system's temporary folder, named `prefix` and six random
 * characters; the folder and everything in it is removed when `f` settles, whether it succeeded or failed.
 */
export const withTempDir = async <A>(prefix: string, f: (dir: string) => Promise<A>): Promise<A> => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  try {
    return await f(dir)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
