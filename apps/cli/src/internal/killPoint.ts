/**
 * Test hooks for crash and ordering tests. With `CORRAL_TEST_KILL_AT=<point>:<agent id>` in its
 * environment, corral sends itself SIGKILL when it reaches that point for that agent. Points:
 * `merged` (the agent's work is on the integration branch, the ledger has not recorded it yet).
 * With `CORRAL_TEST_WAIT_AT=<point>:<agent id>:<file>`, corral waits at that point for that agent
 * until `file` exists (polled, at most 60 s), so a test can order the point after another agent's
 * step without timing. Points: `merging` (the agent's work is committed, its landing not started);
 * with the agent id `run`: `finished` (the run recorded its end in the ledger, its summary not
 * printed), `exiting` (the summary printed, the run's stop requests no longer listened for) and
 * `loading` (before the command's modules are loaded: only the bin's early signal handlers listen).
 * On reaching its point it creates `<file>.waiting`, so a test knows it is there. `blockAt` waits the
 * same way without letting the event loop turn (as a long stretch of module loading does), at the
 * point `loaded-busy` (the command's modules are loaded, its signal handlers not installed yet).
 */
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"

export type Point = "merged"

const target = process.env.CORRAL_TEST_KILL_AT

export const reached = (point: Point, agentId: string): void => {
  if (target !== undefined && target === `${point}:${agentId}`) process.kill(process.pid, "SIGKILL")
}

const waitTarget = process.env.CORRAL_TEST_WAIT_AT

export const waitAt = (point: "merging" | "finished" | "exiting" | "loading", agentId: string): Effect.Effect<void> => {
  if (waitTarget === undefined || !waitTarget.startsWith(`${point}:${agentId}:`)) return Effect.void
  const file = waitTarget.slice(`${point}:${agentId}:`.length)
  return Effect.suspend(() => {
    NodeFs.writeFileSync(`${file}.waiting`, "")
    const deadline = Date.now() + 60_000
    return Effect.sleep("20 millis").pipe(
      Effect.repeat({ until: () => NodeFs.existsSync(file) || Date.now() > deadline })
    )
  })
}

export const blockAt = (point: "loaded-busy", agentId: string): void => {
  if (waitTarget === undefined || !waitTarget.startsWith(`${point}:${agentId}:`)) return
  const file = waitTarget.slice(`${point}:${agentId}:`.length)
  NodeFs.writeFileSync(`${file}.waiting`, "")
  const pause = new Int32Array(new SharedArrayBuffer(4))
  const deadline = Date.now() + 60_000
  while (!NodeFs.existsSync(file) && Date.now() < deadline) Atomics.wait(pause, 0, 0, 20)
}
