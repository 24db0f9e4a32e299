/**
 * Not a test of the suite: a stress run of the escape that `ProcessRunner.tree.test.ts` "setsid,
 * environment kept, parent gone at once … interrupted" checks once. It runs `runs` agents one after
 * the other, each leaving its session with `setsid -f` (its parent gone at once, so only the token in
 * its environment ties it to the agent), interrupts each as soon as the escaped process printed its
 * pid, and counts the escaped processes alive (not zombies) once `Fiber.interrupt` returned; it kills
 * those itself. `mode` `sleep`: the escaped shell does `exec sleep 1000`, as in the test; `exec`: it
 * execs itself without end, so the interruption often lands in an exec.
 *
 * Run from the package folder: `node test/stress/interruptedEscapes.ts <runs> <sleep|exec>` (Node 24).
 * Prints one JSON line: mode, runs, survivors, /proc/loadavg.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { setThroughHelper } from "../../src/internal/processSpawn.ts"
import { sharedHelper } from "../../src/internal/spawnHelper.ts"
import * as ProcessRunner from "../../src/ProcessRunner.ts"
import { isAlive } from "../support/processes.ts"

const runs = Number(process.argv[2] ?? 100)
const mode = process.argv[3] ?? "sleep"
if (!Number.isInteger(runs) || runs < 1 || (mode !== "sleep" && mode !== "exec")) {
  throw new Error(`usage: interruptedEscapes.ts <runs: a positive integer> <sleep|exec>; got ${process.argv.slice(2)}`)
}
const dir = mkdtempSync(join(tmpdir(), "corral-escapes-"))
const loop = join(dir, "exec-loop")
writeFileSync(loop, '#!/bin/sh\nexec "$0"\n')
chmodSync(loop, 0o755)

/** Runs one agent, interrupts it once its escaped process printed `pid <n>`; that pid. */
const interruptedEscape = (run: number) =>
  Effect.gen(function* () {
    const ready = join(dir, `ready-${run}`)
    const then = mode === "exec" ? `exec ${loop}` : "exec sleep 1000"
    const seen = yield* Deferred.make<number>()
    const fiber = yield* Effect.forkChild(
      ProcessRunner.run({
        command: `(setsid -f sh -c 'echo "pid $$"; : > ${ready}; ${then}') ; true
while [ ! -e ${ready} ]; do sleep 0.01; done
sleep 1000`,
        shell: true,
        cwd: dir,
        killGrace: "500 millis",
        onLine: ({ text }) => {
          const match = /^pid (\d+)$/.exec(text)
          if (match !== null) Deferred.doneUnsafe(seen, Exit.succeed(Number(match[1])))
        }
      }).pipe(Effect.provide(NodeServices.layer)),
      { startImmediately: true }
    )
    const pid = yield* Deferred.await(seen)
    yield* Fiber.interrupt(fiber)
    return pid
  })

setThroughHelper(true)
await sharedHelper().ready()
const survivors: Array<number> = []
try {
  for (let run = 0; run < runs; run++) {
    const pid = await Effect.runPromise(interruptedEscape(run))
    if (isAlive(pid)) survivors.push(pid)
  }
} finally {
  for (const pid of survivors) process.kill(-pid, "SIGKILL")
  rmSync(dir, { recursive: true, force: true })
}
const load = readFileSync("/proc/loadavg", "utf8").trim()
process.stdout.write(`${JSON.stringify({ mode, runs, survivors: survivors.length, load })}\n`)
process.exit(0)
