import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Protocol from "../../src/internal/processProtocol.ts"
import { startOf } from "../../src/internal/processWatch.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-protocol-root-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const fixture = new URL("../fixtures/protocolRootOwner.ts", import.meta.url).pathname

/**
 * Starts a process that makes its private directory in `tmp`, waits for its sweep of dead owners'
 * directories and kills itself with SIGKILL; returns that directory's name.
 */
const killedOwnerRoot = (tmp: string): string => {
  const child = spawnSync(process.execPath, [fixture], { env: { ...process.env, TMPDIR: tmp }, encoding: "utf8" })
  assert.strictEqual(child.signal, "SIGKILL", child.stderr)
  const names = child.stdout.trim().split("\n")
  assert.strictEqual(names.length, 1, child.stdout)
  assert.isTrue(existsSync(join(tmp, names[0]!)), "a killed process leaves its private directory")
  return names[0]!
}

// Without /proc (not Linux) the folder records no owner; under CI=true that fails instead of skipping.
describe.skipIf(Protocol.selfOwner() === undefined && process.env.CI !== "true")("private protocol directories", () => {
  it("a process killed with SIGKILL leaves one that names it: boot, pid namespace, pid and start time", () => {
    const tmp = mkdtempSync(join(dir, "name-"))
    const owner = Protocol.ownerOf(killedOwnerRoot(tmp))
    const self = Protocol.selfOwner()!
    assert.isDefined(owner)
    assert.strictEqual(owner!.boot, self.boot)
    assert.strictEqual(owner!.namespace, self.namespace)
    assert.notStrictEqual(owner!.pid, self.pid)
    assert.notStrictEqual(startOf(owner!.pid), owner!.start, "the killed owner is gone")
  })

  it("the sweep removes those of dead owners and of earlier boots, and nothing else", async () => {
    const tmp = mkdtempSync(join(dir, "sweep-"))
    const orphan = killedOwnerRoot(tmp)
    writeFileSync(join(tmp, orphan, "left.usage.jsonl"), "{}\n")
    const self = Protocol.selfOwner()!
    const dead = Protocol.ownerOf(orphan)!
    const tag = (owner: Protocol.Owner) => `${owner.boot}-${owner.namespace}-${owner.pid}-${owner.start}`
    const kept = [
      `corral-agents-${tag(self)}-mine00`,
      `corral-agents-${tag({ ...self, pid: process.ppid, start: startOf(process.ppid)! })}-parent`,
      `corral-agents-${tag({ ...dead, namespace: `1${dead.namespace}` })}-otherns`,
      "corral-agents-untagged",
      "unrelated-folder"
    ]
    for (const name of kept) mkdirSync(join(tmp, name))
    const earlierBoot = `corral-agents-${tag({ ...self, boot: self.boot === "00000000" ? "11111111" : "00000000" })}-oldboot`
    mkdirSync(join(tmp, earlierBoot))

    const removed = await Protocol.sweepOrphanRoots(tmp, self)

    assert.deepStrictEqual(removed.sort(), [earlierBoot, orphan].sort())
    for (const name of kept) assert.isTrue(existsSync(join(tmp, name)), `${name} must be kept`)
  })

  it("the next process's first process agent sweeps on its own", () => {
    const tmp = mkdtempSync(join(dir, "next-"))
    const first = killedOwnerRoot(tmp)
    const second = killedOwnerRoot(tmp)
    assert.isFalse(existsSync(join(tmp, first)), `${first} was not swept by the next process`)
    assert.isTrue(existsSync(join(tmp, second)))
  })
})
