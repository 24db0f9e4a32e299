import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as ProcessRunner from "../src/ProcessRunner.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-tree-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const isAlive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

const groupOf = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
}

/** Ways a descendant leaves the agent's process group; each prints `pid <n>` of the escaped `sleep`. */
const escapes = {
  setsid: `setsid sh -c 'echo "pid $$"; exec sleep 1000' &`,
  "double fork": `sh -c 'sh -c "echo pid \\$\\$; exec sleep 1000" &' ; sleep 0.2`,
  "double fork into a new session": `sh -c 'setsid sh -c "echo pid \\$\\$; exec sleep 1000" &'`,
  nohup: `nohup sh -c 'echo "pid $$"; exec sleep 1000' &`,
  "setsid, environment kept, parent gone at once": `(setsid -f sh -c 'echo "pid $$"; exec sleep 1000') ; true`,
  // bash's job control gives the job a group of its own in the same session; `env -i` drops the token.
  "own group in the session, environment cleared, parent gone at once": `bash -c 'set -m; env -i /bin/sh -c "echo pid \\$\\$; exec /bin/sleep 1000" & true'`
}

const watchPids = () => {
  const pids: Array<number> = []
  const seen = Deferred.makeUnsafe<void>()
  return {
    pids,
    seen,
    onLine: ({ text }: ProcessRunner.OutputLine) => {
      const match = /^pid (\d+)$/.exec(text)
      if (match === null) return
      pids.push(Number(match[1]))
      Deferred.doneUnsafe(seen, Exit.void)
    }
  }
}

const run = (spec: ProcessRunner.ProcessSpec) => ProcessRunner.run(spec).pipe(Effect.provide(NodeServices.layer))

describe("ProcessRunner process trees", () => {
  for (const [name, script] of Object.entries(escapes)) {
    it.live(`${name}: the escaped process is stopped when the agent exits`, () =>
      Effect.gen(function* () {
        const watch = watchPids()
        yield* run({ command: `${script}\nsleep 0.3`, shell: true, cwd: dir, onLine: watch.onLine })
        assert.lengthOf(watch.pids, 1)
        assert.isFalse(isAlive(watch.pids[0]!), `pid ${watch.pids[0]} outlived its agent`)
      })
    )

    it.live(`${name}: the escaped process is stopped when the agent is interrupted (timeout, stop)`, () =>
      Effect.gen(function* () {
        const watch = watchPids()
        const fiber = yield* Effect.forkChild(
          run({
            command: `${script}\nsleep 1000`,
            shell: true,
            cwd: dir,
            onLine: watch.onLine,
            killGrace: "500 millis"
          }),
          { startImmediately: true }
        )
        yield* Deferred.await(watch.seen)
        const pid = watch.pids[0]!
        assert.isTrue(isAlive(pid))
        yield* Fiber.interrupt(fiber)
        assert.isFalse(isAlive(pid), `pid ${pid} outlived its interrupted agent`)
      })
    )
  }

  it.live("the escaped process really left the group (the test would pass without tree tracking otherwise)", () =>
    Effect.gen(function* () {
      const watch = watchPids()
      const fiber = yield* Effect.forkChild(
        run({ command: `${escapes.setsid}\nsleep 1000`, shell: true, cwd: dir, onLine: watch.onLine }),
        { startImmediately: true }
      )
      yield* Deferred.await(watch.seen)
      const pid = watch.pids[0]!
      assert.strictEqual(groupOf(pid), pid)
      yield* Fiber.interrupt(fiber)
    })
  )

  it.live("a process that ignores SIGTERM is killed after killGrace", () =>
    Effect.gen(function* () {
      const watch = watchPids()
      yield* run({
        command: `setsid sh -c 'trap "" TERM; echo "pid $$"; while :; do sleep 0.1; done' &\nsleep 0.3`,
        shell: true,
        cwd: dir,
        onLine: watch.onLine,
        killGrace: "300 millis"
      })
      assert.isFalse(isAlive(watch.pids[0]!))
    })
  )
})
