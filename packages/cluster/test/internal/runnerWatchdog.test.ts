import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { startOf, watch } from "../../src/internal/runnerWatchdog.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-watchdog-"))
const started: Array<number> = []
afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true })
})

/** A process group of its own, sleeping; its pid. */
const group = (): number => {
  const child = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
  child.unref()
  started.push(child.pid!)
  return child.pid!
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

/** Polls until `condition` holds; fails after `ms`. */
const until = (condition: () => boolean, ms: number, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!condition()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * A "runner" that its parent never reaps: `exec sleep` replaces the shell that started it, so once
 * killed it stays a zombie while `holder` lives. Returns the runner's pid and the holder's.
 */
const unreapedRunner = () => {
  const file = join(dir, `runner-${started.length}.pid`)
  const holder = spawn("sh", ["-c", `sleep 300 & echo $! > ${file}; exec sleep 300`], {
    detached: true,
    stdio: "ignore"
  })
  holder.unref()
  started.push(holder.pid!)
  return Effect.gen(function* () {
    yield* until(() => readFileSync(file, { encoding: "utf8", flag: "a+" }).trim() !== "", 10_000, "the runner")
    return Number(readFileSync(file, "utf8").trim())
  })
}

describe("runner watchdog", () => {
  it.live("kills the group once its runner is killed, even while the runner is an unreaped zombie", () =>
    Effect.gen(function* () {
      const runner = yield* unreapedRunner()
      const agent = group()
      watch({ pid: runner, start: startOf(runner) }, agent)
      process.kill(runner, "SIGKILL")
      yield* until(() => /^\S+ \(.*\) Z/.test(readFileSync(`/proc/${runner}/stat`, "latin1")), 10_000, "a zombie")
      yield* until(() => !groupAlive(agent), 30_000, "the group to be killed")
    })
  )

  it.live("kills the group when the runner's pid belongs to another process (a pid handed out again)", () =>
    Effect.gen(function* () {
      const other = group()
      const agent = group()
      // `other` stands for a process that got the dead runner's pid: its start time differs
      watch({ pid: other, start: String(Number(startOf(other)) - 1) }, agent)
      yield* until(() => !groupAlive(agent), 30_000, "the group to be killed")
      assert.isTrue(groupAlive(other))
    })
  )

  it.live("leaves the group alone while the runner lives, and ends once the group is gone", () =>
    Effect.gen(function* () {
      const agent = group()
      const dog = watch({ pid: process.pid, start: startOf("self") }, agent)
      let ended = false
      dog.on("exit", () => {
        ended = true
      })
      yield* Effect.sleep("1200 millis")
      assert.isTrue(groupAlive(agent))
      process.kill(-agent, "SIGKILL")
      yield* until(() => ended, 10_000, "the watchdog to end")
    })
  )
})
