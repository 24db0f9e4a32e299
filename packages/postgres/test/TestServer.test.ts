import { type ChildProcess, spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { isAlive } from "../../platform-node/test/support/processes.ts"
import * as TestServer from "../src/TestServer.ts"

const found = TestServer.findBinaries()
if (found._tag === "Missing" && process.env.CI === "true")
  throw new Error(`PostgreSQL is required on CI: ${found.reason}`)

const gone = (pid: number, dir: string) =>
  Effect.suspend(() => (isAlive(pid) || existsSync(dir) ? Effect.fail("still there") : Effect.void)).pipe(
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 400 })
  )

/** The signal that ended `child`, once it has ended. */
const exited = (child: ChildProcess) =>
  Effect.callback<NodeJS.Signals | null>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.succeed(child.signalCode))
    child.once("exit", (_code, signal) => resume(Effect.succeed(signal)))
  })

const selectOne = (url: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql<{ one: number }>`SELECT 1 AS one`).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
  )

const serverUrl = pathToFileURL(fileURLToPath(new URL("../src/TestServer.ts", import.meta.url))).href

describe.skipIf(found._tag === "Missing")("TestServer", () => {
  it.live(
    "starts a server that takes connections, creates databases, and is stopped and deleted with its scope",
    () =>
      Effect.gen(function* () {
        const { pid, dir } = yield* Effect.scoped(
          Effect.gen(function* () {
            const server = yield* TestServer.start()
            assert.isTrue(isAlive(server.pid))
            const url = yield* server.createDatabase()
            assert.match(url, /\/corral_1$/)
            assert.deepStrictEqual(yield* selectOne(url), [{ one: 1 }])
            return { pid: server.pid, dir: server.dir }
          })
        )
        assert.isFalse(isAlive(pid), "the postmaster is stopped")
        assert.isFalse(existsSync(dir), "the folder is deleted")
      }),
    60_000
  )

  it.live(
    "kill stops the postmaster and restart brings it back on the same port",
    () =>
      Effect.gen(function* () {
        const server = yield* TestServer.start()
        const first = server.pid
        yield* server.kill
        assert.isFalse(isAlive(first))
        const failed = yield* Effect.flip(selectOne(server.url))
        assert.strictEqual(failed._tag, "SqlError")
        yield* server.restart
        assert.notStrictEqual(server.pid, first)
        assert.deepStrictEqual(yield* selectOne(server.url), [{ one: 1 }])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a process that started a server and was killed with SIGKILL leaves no server and no folder behind",
    () =>
      Effect.gen(function* () {
        // Effect.never holds no handle, so the interval keeps the child's event loop alive: without it
        // the child exits by itself and its exit hook, not the SIGKILL path, stops the server.
        const script = `import { Effect } from "effect"
import * as TestServer from ${JSON.stringify(serverUrl)}
setInterval(() => {}, 2 ** 30)
Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const server = yield* TestServer.start()
  console.log(JSON.stringify({ pid: server.pid, dir: server.dir }))
  return yield* Effect.never
})))`
        const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
          cwd: fileURLToPath(new URL("..", import.meta.url)),
          stdio: ["ignore", "pipe", "inherit"]
        })
        const started = yield* Effect.callback<{ pid: number; dir: string }>((resume) => {
          child.stdout!.once("data", (chunk) => resume(Effect.succeed(JSON.parse(String(chunk)))))
        })
        assert.isTrue(isAlive(started.pid))
        assert.isNull(child.exitCode, "the child still runs when it is killed")
        child.kill("SIGKILL")
        assert.strictEqual(yield* exited(child), "SIGKILL")
        yield* gone(started.pid, started.dir)
      }),
    60_000
  )
})
