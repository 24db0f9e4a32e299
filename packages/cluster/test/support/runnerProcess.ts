/**
 * Runner processes for the cluster's tests and for `pnpm bench cluster` (which imports this file): a
 * script that serves a runner with `serveRunner` (`./serveRunner.ts`), started on a free port and
 * followed through the `shards <n>` lines it prints, killed with the scope.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { PostgresClient } from "@corral/postgres"
import { Effect, Schedule, type Scope } from "effect"
import * as RunnerRegistry from "../../src/RunnerRegistry.ts"

/** A free port on 127.0.0.1 (closed again before the runner binds it). */
export const freePort = Effect.callback<number>((resume) => {
  const listener = createServer()
  listener.listen(0, "127.0.0.1", () => {
    const address = listener.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    listener.close(() => resume(Effect.succeed(port)))
  })
})

export interface RunnerProcess {
  readonly child: ChildProcess
  /** `127.0.0.1:<port>`: its address in the runner registry. */
  readonly address: string
  /** Shards of the default group it reported holding last; -1 once it exited. */
  shards: number
  readonly changed: Array<() => void>
}

/**
 * Starts `node script <url> <port> <capacity> ...extra` and returns once it prints `ready`; SIGKILLed
 * when the scope closes.
 */
export const runnerProcess = (
  script: string,
  url: string,
  capacity: number,
  ...extra: ReadonlyArray<string>
): Effect.Effect<RunnerProcess, never, Scope.Scope> =>
  Effect.flatMap(freePort, (port) =>
    Effect.acquireRelease(
      Effect.callback<RunnerProcess>((resume) => {
        const child = spawn(process.execPath, [script, url, String(port), String(capacity), ...extra], {
          stdio: ["ignore", "pipe", "inherit"]
        })
        const runner: RunnerProcess = { child, address: `127.0.0.1:${port}`, shards: 0, changed: [] }
        let buffer = ""
        child.stdout!.on("data", (chunk) => {
          buffer += String(chunk)
          const lines = buffer.split("\n")
          buffer = lines.pop()!
          for (const line of lines) {
            if (line.includes("ready")) resume(Effect.succeed(runner))
            const shards = /^shards (\d+)$/.exec(line)
            if (shards !== null) {
              runner.shards = Number(shards[1])
              for (const listener of runner.changed.splice(0)) listener()
            }
          }
        })
        child.once("exit", (code) => {
          runner.shards = -1
          for (const listener of runner.changed.splice(0)) listener()
          resume(Effect.die(new Error(`runner ${script} exited with ${code}`)))
        })
      }),
      (runner) => Effect.sync(() => runner.child.kill("SIGKILL"))
    )
  )

/** Waits until every runner holds shards of the default group and together they hold all 300. */
export const held = (runners: ReadonlyArray<RunnerProcess>): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (runners.some((r) => r.shards < 0)) return Effect.die(new Error("a runner exited"))
    if (runners.every((r) => r.shards > 0) && runners.reduce((n, r) => n + r.shards, 0) === 300) return Effect.void
    return Effect.andThen(
      Effect.callback<void>((resume) => {
        for (const runner of runners) runner.changed.push(() => resume(Effect.void))
      }),
      held(runners)
    )
  })

/** Waits until the runner registry (what a coordinator's placement reads) lists each runner's shards. */
export const published = (url: string, runners: ReadonlyArray<RunnerProcess>): Effect.Effect<void> =>
  RunnerRegistry.placements().pipe(
    Effect.flatMap((rows) =>
      rows.length === runners.length &&
      runners.every((r) => rows.find((row) => row.address === r.address)?.shards.default?.length === r.shards)
        ? Effect.void
        : Effect.fail("not yet")
    ),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 1200 }),
    Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
    Effect.orDie
  )

/**
 * Waits until every runner holds shards of the default group, together all 300, and the runner
 * registry shows the same.
 */
export const balanced = (url: string, runners: ReadonlyArray<RunnerProcess>): Effect.Effect<void> =>
  Effect.andThen(held(runners), published(url, runners))
