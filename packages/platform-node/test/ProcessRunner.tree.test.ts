import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { setThroughHelper } from "../src/internal/processSpawn.ts"
import { sharedHelper } from "../src/internal/spawnHelper.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import { groupOf, isAlive } from "./support/processes.ts"

const dir = mkdtempSync(join(tmpdir(), "corral-tree-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/**
 * Ways a descendant leaves the agent's process group; each prints `pid <n>` of the escaped `sleep`, then
 * creates the file `ready` (the agent waits for it: the escape is complete whatever the machine's load).
 */
const escapes: Record<string, (ready: string) => string> = {
  setsid: (ready) => `setsid sh -c 'echo "pid $$"; : > ${ready}; exec sleep 1000' &`,
  "double fork": (ready) => `sh -c 'sh -c "echo pid \\$\\$; : > ${ready}; exec sleep 1000" &'`,
  "double fork into a new session": (ready) =>
    `sh -c 'setsid sh -c "echo pid \\$\\$; : > ${ready}; exec sleep 1000" &'`,
  nohup: (ready) => `nohup sh -c 'echo "pid $$"; : > ${ready}; exec sleep 1000' &`,
  "setsid, environment kept, parent gone at once": (ready) =>
    `(setsid -f sh -c 'echo "pid $$"; : > ${ready}; exec sleep 1000') ; true`,
  // bash's job control gives the job a group of its own in the same session; `env -i` drops the token.
  "own group in the session, environment cleared, parent gone at once": (ready) =>
    `bash -c 'set -m; env -i /bin/sh -c "echo pid \\$\\$; : > ${ready}; exec /bin/sleep 1000" & true'`
}

let readyFiles = 0
/** A fresh path for an escape's `ready` file, and the agent script that waits for it after the escape. */
const escaping = (leave: (ready: string) => string, then: string) => {
  const ready = join(dir, `ready-${readyFiles++}`)
  return `${leave(ready)}\nwhile [ ! -e ${ready} ]; do sleep 0.01; done\n${then}`
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

// These processes start through the spawn helper, as a run's do once it is up (ProcessRunner.interrupt
// and ProcessLimits cover the other way).
beforeAll(async () => {
  setThroughHelper(true)
  assert.isDefined(await sharedHelper().ready(), "the spawn helper did not start")
})

describe("ProcessRunner process trees", () => {
  for (const [name, script] of Object.entries(escapes)) {
    it.live(`${name}: the escaped process is stopped when the agent exits`, () =>
      Effect.gen(function* () {
        const watch = watchPids()
        yield* run({ command: escaping(script, "true"), shell: true, cwd: dir, onLine: watch.onLine })
        assert.lengthOf(watch.pids, 1)
        assert.isFalse(isAlive(watch.pids[0]!), `pid ${watch.pids[0]} outlived its agent`)
      })
    )

    it.live(`${name}: the escaped process is stopped when the agent is interrupted (timeout, stop)`, () =>
      Effect.gen(function* () {
        const watch = watchPids()
        const fiber = yield* Effect.forkChild(
          run({
            command: escaping(script, "sleep 1000"),
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
        run({ command: escaping(escapes.setsid!, "sleep 1000"), shell: true, cwd: dir, onLine: watch.onLine }),
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
        command: escaping(
          (ready) => `setsid sh -c 'trap "" TERM; echo "pid $$"; : > ${ready}; while :; do sleep 0.1; done' &`,
          "true"
        ),
        shell: true,
        cwd: dir,
        onLine: watch.onLine,
        killGrace: "300 millis"
      })
      assert.isFalse(isAlive(watch.pids[0]!))
    })
  )
})
