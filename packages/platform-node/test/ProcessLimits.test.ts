import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { setThroughHelper } from "../src/internal/processSpawn.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import { isAlive } from "./support/processes.ts"

const root = mkdtempSync(join(tmpdir(), "corral-limits-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const run = (spec: ProcessRunner.ProcessSpec) => ProcessRunner.run(spec).pipe(Effect.provide(NodeServices.layer))

const TICKS_PER_SECOND = 100

/** User + system CPU time of one process, in ms, from /proc (undefined once it is gone). */
const cpuMs = (pid: number): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
  } catch {
    return undefined
  }
}

const freshDir = (name: string) => {
  const dir = join(root, name)
  mkdirSync(dir, { recursive: true })
  return dir
}

// These processes are started by this process itself, the way used before the spawn helper is up
// (ProcessRunner and ProcessRunner.tree cover the helper).
beforeAll(() => setThroughHelper(false))

describe("ProcessRunner limits: cpuPercent", () => {
  it.live(
    "a busy loop with cpuPercent 25 uses at most 30% of a core over 5 s",
    () =>
      Effect.gen(function* () {
        const started = yield* Deferred.make<number>()
        const fiber = yield* Effect.forkChild(
          run({
            command: "while :; do :; done",
            shell: true,
            cwd: freshDir("cpu"),
            limits: { cpuPercent: 25 },
            onProcess: (pid) => {
              if (pid !== undefined) Deferred.doneUnsafe(started, Exit.succeed(pid))
            }
          }),
          { startImmediately: true }
        )
        const pid = yield* Deferred.await(started)
        // The share is a bound on the agent's CPU time per wall time; load on the machine can only lower it.
        const cpuBefore = cpuMs(pid)!
        const wallBefore = performance.now()
        yield* Effect.sleep("5 seconds")
        const cpuAfter = cpuMs(pid)!
        const wall = performance.now() - wallBefore
        yield* Fiber.interrupt(fiber)
        const share = (cpuAfter - cpuBefore) / wall
        assert.isAtMost(share, 0.3, `busy loop used ${(share * 100).toFixed(1)}% of a core`)
        assert.isAbove(cpuAfter - cpuBefore, 0, "the throttled loop still runs")
        assert.isFalse(isAlive(pid), "the interrupted (possibly stopped) group is gone")
      }),
    30_000
  )

  it.live("a throttled process finishes normally", () =>
    Effect.gen(function* () {
      const result = yield* run({
        command: "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done",
        shell: true,
        cwd: freshDir("cpu-done"),
        limits: { cpuPercent: 50 }
      })
      assert.deepStrictEqual(result.tail, ["done"])
    })
  )
})

describe("ProcessRunner limits: diskMb", () => {
  it.live(
    "writing 200 MB with diskMb 50 is stopped and classified as over the disk limit",
    () =>
      Effect.gen(function* () {
        const cwd = freshDir("disk")
        const error = yield* run({
          command: "for i in $(seq 200); do head -c 1048576 /dev/zero >> big.bin; done; sleep 60",
          shell: true,
          cwd,
          limits: { diskMb: 50 }
        }).pipe(Effect.flip)
        assert.strictEqual(error.reason, "limit")
        assert.strictEqual(error.limit, "diskMb")
        assert.strictEqual(error.limitValue, 50)
        assert.strictEqual(error.signal, "SIGKILL")
        assert.match(error.message, /exceeded its disk limit \(50 MB, \d+ MB used\)/)
      }),
    60_000
  )

  it.live("counts private folders, and a process that exits over the limit between samples fails", () =>
    Effect.gen(function* () {
      const cwd = freshDir("disk-fast")
      const scratch = freshDir("disk-fast-private")
      const error = yield* run({
        command: `head -c 12582912 /dev/zero > ${scratch}/blob`,
        shell: true,
        cwd,
        privateDirs: [scratch],
        limits: { diskMb: 10 }
      }).pipe(Effect.flip)
      assert.strictEqual(error.reason, "limit")
      assert.strictEqual(error.limit, "diskMb")
      assert.strictEqual(error.exitCode, 0)
    })
  )

  it.live("stays under the limit: succeeds", () =>
    Effect.gen(function* () {
      const result = yield* run({
        command: "head -c 1048576 /dev/zero > small.bin",
        shell: true,
        cwd: freshDir("disk-small"),
        limits: { diskMb: 10 }
      })
      assert.strictEqual(result.exitCode, 0)
    })
  )
})
