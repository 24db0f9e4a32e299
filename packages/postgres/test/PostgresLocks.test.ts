import { type ChildProcess, spawn } from "node:child_process"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Claims, ResourceLocks } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { LeaseTables } from "@corral/platform-node"
import { Cause, Context, Effect, Exit, Fiber, Layer, Logger, Result, Schedule } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { ownerLockKey } from "../src/internal/leaseTable.ts"
import { resourceLocksContract } from "../../core/test/contracts/ResourceLocksContract.ts"
import * as PostgresClient from "../src/PostgresClient.ts"
import * as PostgresLocks from "../src/PostgresLocks.ts"
import { sharedServer } from "./support/server.ts"

const server = await sharedServer()

const req = (claims: Claims.Claims) => Result.getOrThrow(Claims.normalize(claims, {}))

const freshDatabase = Effect.orDie(Effect.suspend(() => server!.createDatabase()))

/** A lock service of its own (its own pool, owner and session) on `url`, for the current scope. */
const open = (url: string, options: PostgresLocks.Options = {}) =>
  Effect.map(
    Layer.build(Layer.fresh(Layer.orDie(PostgresLocks.layer(url, { maxConnections: 4, ...options })))),
    (context) => Context.get(context, ResourceLocks.ResourceLocks)
  )

const sqlAt = <A>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, SqlError.SqlError>) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), f).pipe(
    Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
    Effect.orDie
  )

/** Retries `check` (which may fail while the server restarts) until it holds. */
const waitUntil = (what: string, check: Effect.Effect<boolean>) =>
  Effect.suspend(() => check).pipe(
    Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail(`timed out waiting until ${what}`))),
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 1200 }),
    Effect.orDie
  )

const locksUrl = pathToFileURL(fileURLToPath(new URL("../src/PostgresLocks.ts", import.meta.url))).href
const coreUrl = pathToFileURL(fileURLToPath(new URL("../../core/src/index.ts", import.meta.url))).href

const holderScript = `
import { Effect, Result } from "effect"
import { Claims, ResourceLocks } from ${JSON.stringify(coreUrl)}
import * as PostgresLocks from ${JSON.stringify(locksUrl)}
const [url, key, ttl] = process.argv.slice(1)
const request = Result.getOrThrow(Claims.normalize({ write: [key] }, {}))
Effect.runPromise(Effect.gen(function*() {
  const locks = yield* ResourceLocks.ResourceLocks
  const lease = yield* locks.acquire({ runId: "holder", agentId: "h" }, request)
  console.log(JSON.stringify({ held: lease.fencingToken }))
  return yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(PostgresLocks.layer(url, { ttl, renewEvery: "200 millis" }))))
  .catch((error) => { console.error(String(error)); process.exit(1) })
`

/** A process that holds a write lease on `key` until it is killed. */
const holderProcess = (url: string, key: string, ttl: string) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess>((resume) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", holderScript, url, key, ttl], {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        stdio: ["ignore", "pipe", "inherit"]
      })
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
      child.once("exit", (code) => resume(Effect.die(new Error(`holder exited with ${code}`))))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

describe.skipIf(server === undefined)("PostgresLocks", () => {
  it.live("timing options it cannot use: the layer dies with LeaseTables.InvalidOption naming the option", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      const cases = [
        [
          { ttl: "5 seconds", renewEvery: "10 seconds" },
          "PostgresLocks renewEvery: must be shorter than ttl (5000 ms), got 10000 ms: leases would expire between renewals"
        ],
        [
          { pollEvery: "soon" as never },
          'PostgresLocks pollEvery: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ]
      ] as const
      for (const [options, message] of cases) {
        const exit = yield* Effect.exit(Effect.scoped(open(url, options)))
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.instanceOf(defect, LeaseTables.InvalidOption, JSON.stringify(options))
        assert.strictEqual((defect as Error).message, message)
      }
    })
  )

  resourceLocksContract(
    "postgres",
    Layer.unwrap(Effect.map(freshDatabase, (url) => Layer.orDie(PostgresLocks.layer(url, { maxConnections: 4 }))))
  )

  it.live(
    "two services racing for one write key are never both granted it (200 rounds)",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const a = yield* open(url)
        const b = yield* open(url)
        let both = 0
        for (let round = 0; round < 200; round++) {
          const key = req({ write: [`k${round}`] })
          const [x, y] = yield* Effect.all(
            [a.tryAcquire({ runId: "a", agentId: "x" }, key), b.tryAcquire({ runId: "b", agentId: "y" }, key)],
            { concurrency: "unbounded" }
          )
          if (x._tag === "Acquired" && y._tag === "Acquired") both++
          assert.isTrue(x._tag === "Acquired" || y._tag === "Acquired", `round ${round}: someone is granted`)
        }
        assert.strictEqual(both, 0, "rounds in which both services were granted the same write key")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "fencing tokens increase with every grant across services",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const services = [yield* open(url), yield* open(url), yield* open(url)]
        const tokens: Array<number> = []
        for (let i = 0; i < 9; i++) {
          const attempt = yield* services[i % 3]!.tryAcquire(
            { runId: `r${i % 3}`, agentId: `a${i}` },
            req({ write: ["k"] })
          )
          if (attempt._tag !== "Acquired") return assert.fail(`grant ${i} was blocked`)
          tokens.push(attempt.lease.fencingToken)
          yield* services[i % 3]!.release(attempt.lease)
        }
        assert.deepStrictEqual(
          tokens,
          [...tokens].sort((x, y) => x - y)
        )
        assert.strictEqual(new Set(tokens).size, tokens.length)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a waiter is woken by the release NOTIFY of another service, not by polling",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const a = yield* open(url, { ttl: "10 minutes" })
        const b = yield* open(url, { pollEvery: "10 minutes" })
        const held = yield* a.tryAcquire({ runId: "a", agentId: "x" }, req({ write: ["src/"] }))
        if (held._tag !== "Acquired") return assert.fail("expected a grant")
        const released: Array<number> = []
        yield* b.onRelease((lease) => released.push(lease.id))
        assert.strictEqual(
          (yield* b.tryAcquire({ runId: "b", agentId: "y" }, req({ read: ["src/a.ts"] })))._tag,
          "Blocked"
        )
        const waiter = yield* Effect.forkChild(b.acquire({ runId: "b", agentId: "y" }, req({ read: ["src/a.ts"] })), {
          startImmediately: true
        })
        yield* a.release(held.lease)
        const lease = yield* Fiber.join(waiter)
        assert.deepStrictEqual(lease.holder, { runId: "b", agentId: "y" })
        assert.isAbove(lease.fencingToken, held.lease.fencingToken)
        assert.deepStrictEqual(released, [held.lease.id], "onRelease saw the other service's release")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a lease of a process killed with SIGKILL is reclaimed when its session ends, long before its TTL",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const child = yield* holderProcess(url, "src/", "10 minutes")
        const survivor = yield* open(url)
        const blocked = yield* survivor.tryAcquire({ runId: "s", agentId: "a" }, req({ write: ["src/x.ts"] }))
        assert.strictEqual(blocked._tag, "Blocked")
        if (blocked._tag === "Blocked" && blocked.blockers[0]?._tag === "Key")
          assert.deepStrictEqual(blocked.blockers[0].holder, { runId: "holder", agentId: "h" })
        child.kill("SIGKILL")
        const lease = yield* survivor.acquire({ runId: "s", agentId: "a" }, req({ write: ["src/x.ts"] }))
        assert.strictEqual(lease.holder.runId, "s")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a lease of a stopped process that keeps its session lapses at the TTL (database clock)",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const child = yield* holderProcess(url, "src/", "1 second")
        child.kill("SIGSTOP")
        yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGCONT")))
        const survivor = yield* open(url, { pollEvery: "100 millis" })
        const lease = yield* survivor.acquire({ runId: "s", agentId: "a" }, req({ write: ["src/x.ts"] }))
        assert.strictEqual(lease.holder.runId, "s")
        const held = (yield* survivor.snapshot).held.map((claim) => claim.holder.runId)
        assert.deepStrictEqual(held, ["s"], "the stopped holder's lease is gone")
      }).pipe(Effect.scoped),
    60_000
  )
})

const contenderScript = `
import { Effect, Result } from "effect"
import { Claims, ResourceLocks } from ${JSON.stringify(coreUrl)}
import * as PostgresLocks from ${JSON.stringify(locksUrl)}
const [url, worker, count, key] = process.argv.slice(1)
const request = Result.getOrThrow(Claims.normalize({ write: [key] }, {}))
const section = (i) => Effect.scoped(Effect.gen(function*() {
  const locks = yield* ResourceLocks.ResourceLocks
  const lease = yield* locks.acquire({ runId: worker, agentId: "agent-" + i }, request)
  const start = Date.now()
  yield* Effect.sleep("10 millis")
  return { start, end: Date.now(), token: lease.fencingToken }
}))
Effect.runPromise(Effect.forEach(Array.from({ length: Number(count) }, (_, i) => i), (i) => Effect.tap(section(i), () => Effect.sleep("5 millis")))
  .pipe(Effect.provide(PostgresLocks.layer(url, { maxConnections: 4 }))))
  .then((result) => console.log(JSON.stringify(result)), (error) => { console.error(String(error)); process.exit(1) })
`

interface Interval {
  readonly start: number
  readonly end: number
  readonly token: number
}

const contender = (url: string, worker: string, key: string) =>
  Effect.callback<Array<Interval>>((resume) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", contenderScript, url, worker, "15", key], {
      cwd: fileURLToPath(new URL("..", import.meta.url)),
      stdio: ["ignore", "pipe", "inherit"]
    })
    let stdout = ""
    child.stdout!.on("data", (chunk) => (stdout += chunk))
    child.on("close", (code) =>
      resume(code === 0 ? Effect.succeed(JSON.parse(stdout)) : Effect.die(new Error(`${worker} exited with ${code}`)))
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Backend pids holding an owner's session lock in the database of `url`. */
const ownerSessions = (url: string) =>
  Effect.flatMap(
    Effect.service(SqlClient.SqlClient),
    (sql) =>
      sql<{ pid: number }>`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
      AND classid = ${ownerLockKey}::oid AND objsubid = 2
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
  ).pipe(
    Effect.map((rows) => rows.map((row) => Number(row.pid))),
    Effect.provide(PostgresClient.layer(url, { maxConnections: 1 }))
  )

const isCurrent = (url: string, lease: ResourceLocks.Lease) =>
  PostgresLocks.isCurrent(lease).pipe(Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })), Effect.orDie)

describe.skipIf(server === undefined)("PostgresLocks across a lost session", () => {
  it.live(
    "a service whose owner session is cut off takes it again, keeps its lease, and its release wakes a waiter",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const a = yield* open(url, { renewEvery: "50 millis", ttl: "10 minutes" })
        const held = yield* a.tryAcquire({ runId: "a", agentId: "x" }, req({ write: ["k"] }))
        if (held._tag !== "Acquired") return assert.fail("expected a grant")
        const [session] = yield* Effect.orDie(ownerSessions(url))
        yield* sqlAt(url, (sql) => sql`SELECT pg_terminate_backend(${session!})`)
        yield* waitUntil(
          "a holds its owner session again",
          Effect.map(
            Effect.orElseSucceed(ownerSessions(url), () => []),
            (pids) => pids.length === 1 && pids[0] !== session
          )
        )
        assert.isTrue(yield* isCurrent(url, held.lease), "no grant happened meanwhile, so the lease is still a's")
        const b = yield* open(url, { pollEvery: "10 minutes" })
        const waiter = yield* Effect.forkChild(b.acquire({ runId: "b", agentId: "y" }, req({ write: ["k"] })), {
          startImmediately: true
        })
        yield* waitUntil(
          "b's waiter is queued",
          Effect.map(b.snapshot, (s) => s.waiting.length === 1)
        )
        yield* a.release(held.lease)
        const lease = yield* Fiber.join(waiter)
        assert.strictEqual(lease.holder.agentId, "y")
        assert.isAbove(lease.fencingToken, held.lease.fencingToken)
      }).pipe(Effect.scoped),
    60_000
  )
})

describe.skipIf(server === undefined)("PostgresLocks across a Postgres restart", () => {
  it.live(
    "leases of owners that reconnect survive, a release during the outage lands, grants continue with higher fencing tokens, and waiters queued before and after are granted",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const a = yield* open(url, { renewEvery: "100 millis", ttl: "10 minutes" })
        const b = yield* open(url, { renewEvery: "100 millis", pollEvery: "10 minutes" })
        const before = yield* a.tryAcquire({ runId: "a", agentId: "x" }, req({ write: ["k"] }))
        if (before._tag !== "Acquired") return assert.fail("expected a grant")
        const gone = yield* a.tryAcquire({ runId: "a", agentId: "g" }, req({ write: ["gone"] }))
        if (gone._tag !== "Acquired") return assert.fail("expected a grant")
        const first = yield* Effect.forkChild(b.acquire({ runId: "b", agentId: "w1" }, req({ write: ["k"] })), {
          startImmediately: true
        })
        const zeroth = yield* Effect.forkChild(b.acquire({ runId: "b", agentId: "w0" }, req({ write: ["gone"] })), {
          startImmediately: true
        })
        yield* waitUntil(
          "b's first waiters are queued",
          Effect.map(b.snapshot, (s) => s.waiting.length === 2)
        )
        yield* server!.kill
        yield* a.release(gone.lease) // the server is down: the row is deleted with a's first renewal after the restart
        yield* server!.restart
        const retried = yield* a.tryAcquire({ runId: "a", agentId: "y" }, req({ write: ["other"] }))
        if (retried._tag !== "Acquired") return assert.fail("grants continue after the restart")
        assert.isAbove(retried.lease.fencingToken, before.lease.fencingToken, "fencing tokens keep increasing")
        yield* waitUntil(
          "both services hold their owner sessions again",
          Effect.map(
            Effect.orElseSucceed(ownerSessions(url), () => []),
            (pids) => pids.length === 2
          )
        )
        assert.isTrue(yield* isCurrent(url, before.lease), "the lease taken before the restart survived")
        assert.isTrue(yield* isCurrent(url, retried.lease), "the lease taken after the restart is current")
        const second = yield* Effect.forkChild(b.acquire({ runId: "b", agentId: "w2" }, req({ write: ["other"] })), {
          startImmediately: true
        })
        yield* waitUntil(
          "b's second waiter is queued",
          Effect.map(b.snapshot, (s) => s.waiting.some((waiter) => waiter.holder.agentId === "w2"))
        )
        yield* a.release(retried.lease)
        const afterRestart = yield* Fiber.join(second)
        assert.strictEqual(afterRestart.holder.agentId, "w2")
        yield* a.release(before.lease)
        const beforeRestart = yield* Fiber.join(first)
        assert.strictEqual(beforeRestart.holder.agentId, "w1")
        const tokens = [before, retried].map((t) => t.lease.fencingToken)
        tokens.push(afterRestart.fencingToken, beforeRestart.fencingToken)
        assert.deepStrictEqual(
          tokens,
          [...tokens].sort((x, y) => x - y),
          "grant order"
        )
        assert.strictEqual(new Set(tokens).size, tokens.length)
        const afterOutage = yield* Fiber.join(zeroth)
        assert.strictEqual(afterOutage.holder.agentId, "w0")
        assert.isAbove(afterOutage.fencingToken, gone.lease.fencingToken)
      }).pipe(Effect.scoped),
    120_000
  )
})

describe.skipIf(server === undefined)("PostgresLocks through an outage", () => {
  it.live("warns once that the session and LISTEN were lost, not at every reconnect attempt", () =>
    Effect.gen(function* () {
      const url = yield* freshDatabase
      const warnings: Array<string> = []
      const capture = Logger.make(({ message }) => {
        const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
        if (text.startsWith("corral:")) warnings.push(text)
      })
      const count = (what: string) => warnings.filter((w) => w.includes(what)).length
      yield* Effect.gen(function* () {
        yield* open(url, { renewEvery: "100 millis" })
        yield* server!.kill
        yield* waitUntil(
          "the service saw the session and LISTEN fail",
          Effect.sync(() => count("session was lost") > 0 && count("LISTEN failed") > 0)
        )
        yield* Effect.sleep("1500 millis") // the outage goes on: about 7 reconnect attempts of each
        yield* server!.restart
        yield* waitUntil(
          "the owner session is held again",
          Effect.map(
            Effect.orElseSucceed(ownerSessions(url), () => []),
            (pids) => pids.length === 1
          )
        )
      }).pipe(Effect.provide(Logger.layer([capture])), Effect.scoped)
      assert.strictEqual(count("session was lost"), 1, warnings.join("\n"))
      assert.strictEqual(count("LISTEN failed"), 1, warnings.join("\n"))
    })
  )
})

describe.skipIf(server === undefined)("PostgresLocks across processes", () => {
  it.live(
    "processes contending for overlapping write claims never hold them at once, in fencing-token order",
    () =>
      Effect.gen(function* () {
        const url = yield* freshDatabase
        const runs = yield* Effect.all(
          [contender(url, "p1", "src/"), contender(url, "p2", "src/parser.ts"), contender(url, "p3", "src/")],
          { concurrency: "unbounded" }
        )
        const all = runs.flat().sort((x, y) => x.token - y.token)
        assert.strictEqual(all.length, 45)
        for (let i = 1; i < all.length; i++) {
          assert.isAtMost(all[i - 1]!.end, all[i]!.start, `grants ${all[i - 1]!.token} and ${all[i]!.token} overlapped`)
        }
      }),
    120_000
  )
})
