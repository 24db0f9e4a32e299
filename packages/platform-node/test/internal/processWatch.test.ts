import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { forgetEnvironments, procAvailable, sampleGroup, Strays, startOf } from "../../src/internal/processWatch.ts"

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

/** A shell in a process group of its own running `script`, and a promise of its exit (this process reaps it). */
const shell = (script: string) => {
  const child = spawn("/bin/sh", ["-c", script], { detached: true, stdio: "ignore" })
  children.push(child)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return { pid: child.pid!, exited }
}

describe.skipIf(!procAvailable && process.env.CI !== "true")("processWatch", () => {
  it("tells from the exit's scan whether the group has a live member, its reaped leader's pid unread", async () => {
    const lone = shell("exit 0")
    const loneStrays = new Strays(lone.pid, "CORRAL_PROCESS_TOKEN=lone")
    await lone.exited
    assert.deepStrictEqual(loneStrays.collect(true), [])
    assert.isFalse(loneStrays.groupAlive, "the group was the leader alone")
    const left = shell("sleep 1000 & exit 0")
    const leftStrays = new Strays(left.pid, "CORRAL_PROCESS_TOKEN=left")
    await left.exited
    assert.deepStrictEqual(leftStrays.collect(true), [], "the sleep is in the group, not a stray")
    assert.isTrue(leftStrays.groupAlive, "the leader is gone, the sleep it started is not")
    process.kill(-left.pid, "SIGKILL")
  })

  it("reads a process's start time and group from its stat, whatever its command name holds", () => {
    for (const name of ["plain", "a) b (c", ") 1 2 3 "]) {
      const pid = sleeper(name)
      const fields = fieldsOf(pid)
      assert.strictEqual(startOf(pid), Number(fields[19]), name)
      const scanned = sampleGroup(pid, 0)
      assert.strictEqual(scanned?.members, 1, name)
    }
  })

  it("never takes a stray caught in an exec for another's process", async () => {
    // The stray leaves the agent's session, its parent exits at once, and it execs itself without end:
    // its environment reads empty while an exec replaces it. Each scan reads the environment anew.
    const loop = join(dir, "exec-loop")
    writeFileSync(loop, '#!/bin/sh\nexec "$0"\n', { mode: 0o755 })
    const leader = spawn("/bin/sh", ["-c", `setsid -f sh -c 'echo $$; exec ${loop}'; exec sleep 1000`], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, CORRAL_PROCESS_TOKEN: "execs" }
    })
    children.push(leader)
    const [line] = (await once(leader.stdout!, "data")) as [Buffer]
    const stray = Number(line.toString().trim())
    try {
      // Until 20 scans caught it in an exec (one in 25 or so here), each then telling it is not known yet.
      let caught = 0
      for (let scan = 0; scan < 5000 && caught < 20; scan++) {
        forgetEnvironments()
        const strays = new Strays(leader.pid!, "CORRAL_PROCESS_TOKEN=execs")
        if (strays.collect().some((entry) => entry.pid === stray)) continue
        assert.isAbove(strays.unsettled, 0, `scan ${scan} took the stray ${stray}, caught in an exec, for another's`)
        caught += 1
      }
      assert.isAbove(caught, 0, "no scan caught the stray in an exec: the test did not test it")
    } finally {
      process.kill(-stray, "SIGKILL")
      process.kill(-leader.pid!, "SIGKILL")
    }
  })
})
