// One temporary directory per `pnpm test` run, removed when the run ends: every test and every
// process it starts (through the inherited TMPDIR) makes its temporary files under it, so a run
// leaves nothing in the machine's temporary directory — also what processes killed by a test left.
// Its name holds the run's pid, so a later run removes the folder of a run that was killed before
// its teardown.
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { isAlive } from "../packages/platform-node/test/support/processes.ts"

const PREFIX = "corral-tests-"

/**
 * Removes the folders in `tmp` of test runs whose process is gone; returns their paths. A folder it
 * cannot remove is left, told through `warn`: another run's leftovers never stop this one.
 */
export const removeStale = (
  tmp: string,
  warn: (warning: string) => void = (warning) => process.stderr.write(`${warning}\n`)
): ReadonlyArray<string> => {
  const stale = NodeFs.readdirSync(tmp)
    .map((name) => ({ name, pid: Number(new RegExp(`^${PREFIX}(\\d+)-`).exec(name)?.[1]) }))
    .filter(({ pid }) => Number.isInteger(pid) && pid > 0 && !isAlive(pid))
  return stale.flatMap(({ name, pid }) => {
    const dir = NodePath.join(tmp, name)
    try {
      NodeFs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
      return [dir]
    } catch (error) {
      warn(`could not remove ${dir}, left by test run ${pid}: ${(error as Error).message}`)
      return []
    }
  })
}

export default function setup(): () => void {
  removeStale(NodeOs.tmpdir())
  const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), `${PREFIX}${process.pid}-`))
  // As open as /tmp: a test's Postgres server runs as another user and creates its files below it.
  NodeFs.chmodSync(dir, 0o1777)
  const previous = process.env.TMPDIR
  process.env.TMPDIR = dir
  return () => {
    if (previous === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = previous
    NodeFs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
  }
}
