import { spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { expect, it, onTestFinished } from "vitest"
import { tempDir } from "./helpers.ts"
import { removeStale } from "./tmpdir.setup.ts"

it("removes the temporary folders of test runs whose process is gone, and no other", () => {
  const tmp = tempDir("stale-")
  onTestFinished(() => NodeFs.rmSync(tmp, { recursive: true, force: true }))
  const gone = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" })
  const deadPid = Number(gone.stdout)
  expect(deadPid).toBeGreaterThan(0)
  const dead = NodePath.join(tmp, `corral-tests-${deadPid}-abcdef`)
  const live = NodePath.join(tmp, `corral-tests-${process.pid}-abcdef`)
  const unnamed = NodePath.join(tmp, "corral-tests-abcdef")
  for (const dir of [dead, live, unnamed]) NodeFs.mkdirSync(NodePath.join(dir, "left"), { recursive: true })
  expect(removeStale(tmp)).toEqual([dead])
  expect([dead, live, unnamed].map((dir) => NodeFs.existsSync(dir))).toEqual([false, true, true])
})

it("a stale folder it cannot remove is left with a warning, not thrown (the setup goes on); the others go", () => {
  const tmp = tempDir("stale-")
  const gone = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" })
  const deadPid = Number(gone.stdout)
  const stuck = NodePath.join(tmp, `corral-tests-${deadPid}-stuck`)
  const dead = NodePath.join(tmp, `corral-tests-${deadPid}-abcdef`)
  const pinned = NodePath.join(stuck, "pinned")
  for (const dir of [stuck, dead]) NodeFs.mkdirSync(dir, { recursive: true })
  NodeFs.writeFileSync(pinned, "")
  const immutable = spawnSync("chattr", ["+i", pinned])
  onTestFinished(() => {
    spawnSync("chattr", ["-i", pinned])
    NodeFs.rmSync(tmp, { recursive: true, force: true })
  })
  if (immutable.status !== 0) return expect.fail(`chattr +i failed: ${immutable.stderr}`)
  const warnings: Array<string> = []
  expect(removeStale(tmp, (warning) => warnings.push(warning))).toEqual([dead])
  expect([stuck, dead].map((dir) => NodeFs.existsSync(dir))).toEqual([true, false])
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toContain(`could not remove ${stuck}, left by test run ${deadPid}:`)
})
