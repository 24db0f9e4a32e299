import { mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Git from "../src/Git.ts"
import { sharedHelper } from "../src/internal/spawnHelper.ts"
import { isAlive } from "./support/processes.ts"
import { finishingSoon } from "./support/stoppableScripts.ts"

const dir = realpathSync(mkdtempSync(join(tmpdir(), "corral-git-interrupt-")))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/**
 * Interrupts a git command (a `sh` standing in for git through `via`) that needs 300 ms to finish:
 * once the interruption completes, the command must have finished, unsignalled (a SIGTERM can leave
 * git's lock files).
 */
const interruptSlowCommand = async () => {
  const { script, pid: started, outcome } = finishingSoon(dir)
  const fiber = Effect.runFork(Git.run(["status"], { cwd: dir, via: ["sh", "-c", script, "sh"] }))
  const pid = await started
  await Effect.runPromise(Fiber.interrupt(fiber))
  assert.isFalse(isAlive(pid), "the command still runs after the interruption completed")
  assert.strictEqual(readFileSync(outcome, "utf8"), "finished\n")
}

describe("Git.run interrupted", () => {
  it("through the spawn helper: completes once the command has finished", async () => {
    assert.isDefined(await sharedHelper().ready())
    await interruptSlowCommand()
  })

  it("started by this process: completes once the command has finished", async () => {
    await sharedHelper().stop()
    assert.isDefined(sharedHelper().unavailable)
    await interruptSlowCommand()
  })
})
