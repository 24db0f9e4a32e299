import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { procAvailable, readLeader, sampleGroup, startOf } from "../../src/internal/processWatch.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-process-watch-"))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})

/** `/proc/<pid>/stat` split the plain way: the fields after the command name. */
const fieldsOf = (pid: number): Array<string> => {
  const text = readFileSync(`/proc/${pid}/stat`, "latin1")
  return text.slice(text.lastIndexOf(")") + 2).split(" ")
}

/** A `sleep` in a process group of its own whose command name (the name it was started by) is `name`. */
const sleeper = (name: string): number => {
  const file = join(dir, name)
  symlinkSync("/bin/sleep", file)
  const child = spawn(file, ["1000"], { detached: true, stdio: "ignore" })
  children.push(child)
  return child.pid!
}

describe.skipIf(!procAvailable && process.env.CI !== "true")("processWatch", () => {
  it("reads a process's start time and group from its stat, whatever its command name holds", () => {
    for (const name of ["plain", "a) b (c", ") 1 2 3 "]) {
      const pid = sleeper(name)
      const fields = fieldsOf(pid)
      assert.strictEqual(startOf(pid), Number(fields[19]), name)
      const leader = readLeader(pid)
      assert.strictEqual(leader.start, Number(fields[19]), name)
      assert.strictEqual(leader.sample?.members, 1, name)
      const scanned = sampleGroup(pid, 0)
      assert.strictEqual(scanned?.members, 1, name)
    }
  })
})
