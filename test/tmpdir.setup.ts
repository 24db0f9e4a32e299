// One temporary directory per `pnpm test` run, removed when the run ends: every test and every
// process it starts (through the inherited TMPDIR) makes its temporary files under it, so a run
// leaves nothing in the machine's temporary directory — also what processes killed by a test left.
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

export default function setup(): () => void {
  const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-tests-"))
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
