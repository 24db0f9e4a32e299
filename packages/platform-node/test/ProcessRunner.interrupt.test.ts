import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { setThroughHelper } from "../src/internal/processSpawn.ts"
import { sharedHelper } from "../src/internal/spawnHelper.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import { isAlive, liveGroupMembers } from "./support/processes.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-process-interrupt-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A tree that ignores SIGTERM: a leader and its child append their pids to `pidFile`. */
const stubbornTree = (pidFile: string, onProcess: (pid: number | undefined) => void) =>
  ProcessRunner.run({
    command: `trap "" TERM; sleep 300 & echo $$ $! >> ${pidFile}; wait`,
    shell: true,
    cwd: dir,
    killGrace: "200 millis",
    onProcess
  }).pipe(Effect.provide(NodeServices.layer))

/** Nothing is left of the trees whose leaders were `reported`: neither the leader nor anything of its group. */
const assertNoneLeft = (label: string, reported: ReadonlyArray<number>) => {
  for (const pid of reported) {
    assert.isFalse(isAlive(pid), `${label}: pid ${pid} outlived its interrupted run`)
    assert.strictEqual(liveGroupMembers(pid), 0, `${label}: the group of pid ${pid} outlived its interrupted run`)
  }
}

/**
 * Starts a {@link stubbornTree}, interrupts its run at a given point of the start-up, and checks what a
 * runner relies on: a leader that started was reported to `onProcess` (where the runner starts its
 * watchdog), and nothing of the tree is left once the interruption is over, so a kill of the leader
 * alone, or SIGTERM without SIGKILL, would fail.
 */
const interruptAt = (label: string, interrupt: (fiber: Fiber.Fiber<unknown, unknown>) => Effect.Effect<void>) =>
  Effect.gen(function* () {
    const pidFile = join(dir, `${label}.pid`)
    const reported: Array<number> = []
    const fiber = yield* Effect.forkChild(
      stubbornTree(pidFile, (pid) => {
        if (pid !== undefined) reported.push(pid)
      }),
      { startImmediately: true }
    )
    yield* interrupt(fiber)
    yield* Fiber.await(fiber)
    const written = existsSync(pidFile)
      ? readFileSync(pidFile, "utf8")
          .split(/\s+/)
          .filter((word) => word !== "")
          .map(Number)
      : []
    for (const pid of written) assert.isFalse(isAlive(pid), `${label}: pid ${pid} outlived its interrupted run`)
    if (written.length > 0)
      assert.include(reported, written[0], `${label}: pid ${written[0]} started without onProcess`)
    assertNoneLeft(label, reported)
  })

describe.each([
  { way: "through the spawn helper", helper: true },
  { way: "started by this process", helper: false }
])("ProcessRunner interrupted during its start-up, $way", ({ helper }) => {
  const way = helper ? "helper" : "direct"
  beforeAll(async () => {
    setThroughHelper(helper)
    if (helper) assert.isDefined(await sharedHelper().ready(), "the spawn helper did not start")
  })

  it.live("leaves no process, at every interruption point from 0 to 20 scheduler yields", () =>
    Effect.forEach(
      Array.from({ length: 21 }, (_, yields) => yields),
      (yields) =>
        interruptAt(`${way}-yields-${yields}`, (fiber) =>
          Effect.andThen(Effect.repeat(Effect.yieldNow, { times: yields }), Fiber.interrupt(fiber))
        ),
      { discard: true }
    )
  )

  it.live("leaves no process when interrupted from onProcess, right after the spawn", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 10; i++) {
        const reported: Array<number> = []
        let self: Fiber.Fiber<unknown, unknown> | undefined
        const fiber = yield* Effect.forkChild(
          stubbornTree(join(dir, `${way}-hook-${i}.pid`), (pid) => {
            if (pid === undefined) return
            reported.push(pid)
            self?.interruptUnsafe()
          }),
          { startImmediately: false }
        )
        self = fiber
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(exit._tag === "Failure", `${way}-hook-${i}: the run was not interrupted`)
        assert.lengthOf(reported, 1)
        assertNoneLeft(`${way}-hook-${i}`, reported)
      }
    })
  )
})
