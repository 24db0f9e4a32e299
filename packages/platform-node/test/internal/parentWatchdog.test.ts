import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ParentWatchdog from "../../src/internal/parentWatchdog.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-parent-watchdog-"))
const groups: Array<number> = []
afterAll(() => {
  for (const pid of groups) {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true })
})

const fixture = new URL("../fixtures/dieWithParent.ts", import.meta.url).pathname
const token = (name: string) => `CORRAL_PROCESS_TOKEN=watchdog-test-${name}-${process.pid}`

/** Alive and no zombie: a killed orphan stays a zombie until PID 1 reaps it, lazily or never in a container. */
const isAlive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat[stat.lastIndexOf(")") + 2] !== "Z"
  } catch {
    return false
  }
}

/** A process group of its own, sleeping, with `env` in its environment; its pid. */
const group = (env: Record<string, string> = {}): number => {
  const child = spawn("sleep", ["300"], { detached: true, stdio: "ignore", env: { ...process.env, ...env } })
  child.unref()
  groups.push(child.pid!)
  return child.pid!
}

/** Polls real OS state until `condition` holds; fails after `ms`. */
const until = (condition: () => boolean, ms: number, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!condition()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })

/**
 * A parent that its own parent never reaps: `exec sleep` replaces the shell that started it, so once
 * killed it stays a zombie while the holder lives. Returns its pid.
 */
const unreapedParent = () => {
  const file = join(dir, `parent-${groups.length}.pid`)
  const holder = spawn("sh", ["-c", `sleep 300 & echo $! > ${file}; exec sleep 300`], {
    detached: true,
    stdio: "ignore"
  })
  holder.unref()
  groups.push(holder.pid!)
  return Effect.gen(function* () {
    yield* until(() => readFileSync(file, { encoding: "utf8", flag: "a+" }).trim() !== "", 10_000, "the parent")
    return Number(readFileSync(file, "utf8").trim())
  })
}

/** Runs the fixture runner, which SIGKILLs itself at `mode`; the pid of the command it started. */
const runnerThatDies = (mode: "at-spawn" | "when-ready", cwd: string, command: string) =>
  Effect.promise(async () => {
    const child: ChildProcess = spawn(process.execPath, [fixture, mode, cwd, command], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
    const first = await lines.next()
    assert.isFalse(first.done, "the runner printed no pid")
    groups.push(Number(first.value))
    return Number(first.value)
  })

describe("parent watchdog", () => {
  it.live("a runner SIGKILLed the moment its command started takes the command down", () =>
    Effect.gen(function* () {
      const cwd = mkdtempSync(join(dir, "at-spawn-"))
      const pid = yield* runnerThatDies("at-spawn", cwd, "exec sleep 300")
      yield* until(() => !isAlive(pid), 30_000, "the command to die with its runner")
    })
  )

  it.live("a killed runner takes down the command's group and what left it with the token", () =>
    Effect.gen(function* () {
      const cwd = mkdtempSync(join(dir, "escaped-"))
      const pid = yield* runnerThatDies(
        "when-ready",
        cwd,
        `setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' & sleep 300 & echo $! > member.pid; while [ ! -s escaped.pid ]; do sleep 0.02; done; : > ready; wait`
      )
      yield* until(() => !isAlive(pid), 30_000, "the group's leader to die")
      const escaped = Number(readFileSync(join(cwd, "escaped.pid"), "utf8"))
      const member = Number(readFileSync(join(cwd, "member.pid"), "utf8"))
      groups.push(escaped)
      yield* until(() => !isAlive(member) && !isAlive(escaped), 30_000, "the member and the escaped process")
    })
  )

  it.live("kills when the parent is an unreaped zombie, and when its pid belongs to another process", () =>
    Effect.gen(function* () {
      const parent = yield* unreapedParent()
      const first = group()
      ParentWatchdog.start(ParentWatchdog.watched(parent), token("zombie")).spawned(first)
      process.kill(parent, "SIGKILL")
      yield* until(() => /^\S+ \(.*\) Z/.test(readFileSync(`/proc/${parent}/stat`, "latin1")), 10_000, "a zombie")
      yield* until(() => !isAlive(first), 30_000, "the group to be killed")

      const other = group()
      const second = group()
      // `other` stands for a process that got the dead parent's pid: its start time differs
      ParentWatchdog.start({ pid: other, start: ParentWatchdog.watched(other).start! - 1 }, token("reused")).spawned(
        second
      )
      yield* until(() => !isAlive(second), 30_000, "the group to be killed")
      assert.isTrue(isAlive(other))
    })
  )

  it.live("kills a process with the token that it catches in the middle of an exec", () =>
    Effect.gen(function* () {
      // The process execs itself without end: its environment reads empty while an exec replaces it,
      // about one read in six here, so a watchdog that took that for "no token" would miss it.
      const loop = join(dir, "exec-loop")
      writeFileSync(loop, '#!/bin/sh\nexec "$0"\n', { mode: 0o755 })
      for (let trial = 0; trial < 20; trial++) {
        const name = `exec-${trial}`
        const child = spawn(loop, [], {
          detached: true,
          stdio: "ignore",
          env: { ...process.env, CORRAL_PROCESS_TOKEN: `watchdog-test-${name}-${process.pid}` }
        })
        child.unref()
        groups.push(child.pid!)
        const gone = group()
        // A parent whose start time differs: gone from the first look, so the watchdog goes at once.
        ParentWatchdog.start({ pid: gone, start: ParentWatchdog.watched(gone).start! - 1 }, token(name)).spawned(
          undefined
        )
        yield* until(() => !isAlive(child.pid!), 10_000, `trial ${trial}: the process caught in an exec to be killed`)
      }
    })
  )

  it.live("leaves the command alone while the parent lives, and ends when stopped", () =>
    Effect.gen(function* () {
      const parent = group()
      const command = group({ CORRAL_PROCESS_TOKEN: "watchdog-test-kept" })
      const dog = ParentWatchdog.start(ParentWatchdog.watched(parent), "CORRAL_PROCESS_TOKEN=watchdog-test-kept")
      dog.spawned(command)
      yield* Effect.sleep(`${ParentWatchdog.INTERVAL_SECONDS * 3} seconds`)
      assert.isTrue(isAlive(command))
      dog.stop()
      process.kill(parent, "SIGKILL")
      yield* Effect.sleep(`${ParentWatchdog.INTERVAL_SECONDS * 3} seconds`)
      assert.isTrue(isAlive(command), "a stopped watchdog kills nothing")
    })
  )
})
