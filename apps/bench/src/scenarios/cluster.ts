/**
 * `pnpm bench cluster`: dispatch overhead per agent (in process, SQLite-shared claims, Postgres claims,
 * a cluster of one runner), throughput with 1, 2 and 4 runner processes, claim grants per second on
 * hot and disjoint keys (Postgres and SQLite), and the wake-up latency of a waiter after a release
 * (Postgres NOTIFY). Starts its own throwaway Postgres.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Cluster, RunnerRegistry } from "@corral/cluster"
import { Agent, AgentKind, Claims, Corral, Executor, ResourceLocks } from "@corral/core"
import { SqliteLocks } from "@corral/platform-node"
import { PostgresClient, PostgresLocks, TestServer } from "@corral/postgres"
import { Context, Effect, Fiber, Layer, Result, Schedule } from "effect"
import { Sleep } from "../lib/clusterKinds.ts"

const runnerScript = new URL("../lib/clusterRunner.ts", import.meta.url).pathname

const freePort = Effect.callback<number>((resume) => {
  const listener = createServer()
  listener.listen(0, "127.0.0.1", () => {
    const address = listener.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    listener.close(() => resume(Effect.succeed(port)))
  })
})

const startRunner = (url: string, capacity: number) =>
  Effect.flatMap(freePort, (port) =>
    Effect.acquireRelease(
      Effect.callback<ChildProcess>((resume) => {
        const child = spawn(process.execPath, [runnerScript, url, String(port), String(capacity)], {
          stdio: ["ignore", "pipe", "inherit"]
        })
        child.stdout!.on("data", (chunk) => String(chunk).includes("ready") && resume(Effect.succeed(child)))
        child.once("exit", (code) => resume(Effect.die(new Error(`bench runner exited with ${code}`))))
      }),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
  )

/** Waits until `count` runners are registered and each has had time to take shards (two refreshes). */
const settled = (url: string, count: number) =>
  RunnerRegistry.list().pipe(
    Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
    Effect.map((list) => list.length),
    Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (n) => n >= count }),
    Effect.andThen(Effect.sleep("3 seconds")),
    Effect.orDie
  )

const timedRun = <E, R>(agents: ReadonlyArray<Agent.Agent<unknown, E, R>>, concurrency: number) =>
  Effect.gen(function* () {
    const start = performance.now()
    const result = yield* Corral.run(agents, { concurrency })
    const failed = result.outcomes.filter((outcome) => outcome._tag !== "Succeeded").length
    if (failed > 0) return yield* Effect.die(new Error(`${failed} agents did not succeed`))
    return performance.now() - start
  })

const noopAgents = (n: number, claims: boolean) =>
  Array.from({ length: n }, (_, i) =>
    Agent.make(`a${i}`, { run: Effect.void, ...(claims ? { claims: { write: [`k${i % 64}`] } } : {}) })
  )

const kindAgents = (n: number, ms: number, prefix = "a") =>
  Array.from({ length: n }, (_, i) => AgentKind.agent(Sleep, `${prefix}${i}`, { ms }))

const locksOf = (layer: Layer.Layer<ResourceLocks.ResourceLocks, unknown>) =>
  Effect.map(Layer.build(Layer.orDie(layer)), (context) => Context.get(context, ResourceLocks.ResourceLocks))

const figure = (scenario: string, what: string, value: number, unit: string) => ({ case: scenario, what, value, unit })

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const dispatch = (url: string, sqliteFile: string, n: number) =>
  Effect.gen(function* () {
    const rows: Array<Record<string, unknown>> = []
    const row = (what: string, ms: number) =>
      rows.push({ case: `dispatch, ${n} no-op agents`, what, perAgentMs: round(ms / n, 3) })
    row("in process (Agent.make)", yield* timedRun(noopAgents(n, false), 8))
    row(
      "in process, registered kind (Executor.layerLocal)",
      yield* timedRun(kindAgents(n, 0), 8).pipe(Effect.provide(Executor.layerLocal([Sleep])))
    )
    const sqlite = yield* locksOf(SqliteLocks.layer(sqliteFile))
    row(
      "in process + SQLite-shared claims",
      yield* timedRun(noopAgents(n, true), 8).pipe(Effect.provideService(ResourceLocks.ResourceLocks, sqlite))
    )
    const pg = yield* locksOf(PostgresLocks.layer(url))
    row(
      "in process + Postgres claims",
      yield* timedRun(noopAgents(n, true), 8).pipe(Effect.provideService(ResourceLocks.ResourceLocks, pg))
    )
    const executor = Context.get(yield* Layer.build(Layer.orDie(Cluster.layerExecutor({ url }))), Executor.Executor)
    yield* timedRun(kindAgents(8, 0, "warm"), 8).pipe(Effect.provideService(Executor.Executor, executor))
    row(
      "cluster on Postgres, 1 runner (target <= 2 ms)",
      yield* timedRun(kindAgents(n, 0), 64).pipe(Effect.provideService(Executor.Executor, executor))
    )
    return rows
  })

const throughput = (server: TestServer.TestServer, n: number, ms: number) =>
  Effect.gen(function* () {
    const rows: Array<Record<string, unknown>> = []
    let one = 0
    for (const count of [1, 2, 4]) {
      const elapsed = yield* Effect.scoped(
        Effect.gen(function* () {
          const url = yield* Effect.orDie(server.createDatabase())
          yield* Effect.all(
            Array.from({ length: count }, () => startRunner(url, 8)),
            { concurrency: "unbounded" }
          )
          yield* settled(url, count)
          const executor = Context.get(
            yield* Layer.build(Layer.orDie(Cluster.layerExecutor({ url }))),
            Executor.Executor
          )
          return yield* timedRun(kindAgents(n, ms), count * 8).pipe(Effect.provideService(Executor.Executor, executor))
        })
      )
      if (count === 1) one = elapsed
      rows.push(
        figure(
          `throughput, ${n} agents x ${ms} ms, capacity 8 per runner`,
          `${count} runner${count > 1 ? "s" : ""}: ${Math.round(elapsed)} ms (floor ${Math.round((n * ms) / (count * 8))} ms)${count === 4 ? " (target >= 3.6x)" : ""}`,
          round(one / elapsed),
          "x one runner"
        )
      )
    }
    return rows
  })

const request = (key: string) => Result.getOrThrow(Claims.normalize({ write: [key] }, {}))

const grants = (locks: ResourceLocks.ResourceLocks["Service"], pairs: number, hot: boolean) =>
  Effect.gen(function* () {
    const requests = Array.from({ length: 64 }, (_, i) => request(hot ? "hot" : `k${i}`))
    const start = performance.now()
    yield* Effect.forEach(
      Array.from({ length: 4 }, (_, worker) => worker),
      (worker) =>
        Effect.forEach(
          Array.from({ length: pairs / 4 }, (_, i) => i),
          (i) =>
            Effect.scoped(locks.acquire({ runId: "bench", agentId: `w${worker}` }, requests[(worker * 16 + i) % 64]!)),
          { discard: true }
        ),
      { concurrency: 4, discard: true }
    )
    return performance.now() - start
  })

const wakeUps = (
  locks: readonly [ResourceLocks.ResourceLocks["Service"], ResourceLocks.ResourceLocks["Service"]],
  samples: number
) =>
  Effect.gen(function* () {
    const [a, b] = locks
    const latencies: Array<number> = []
    for (let i = 0; i < samples; i++) {
      const held = yield* a.tryAcquire({ runId: "a", agentId: "x" }, request("wake"))
      if (held._tag !== "Acquired") return yield* Effect.die(new Error("wake key busy"))
      let releasedAt = 0
      const waiter = yield* Effect.forkChild(
        Effect.scoped(
          Effect.map(b.acquire({ runId: "b", agentId: "y" }, request("wake")), () => performance.now() - releasedAt)
        ),
        { startImmediately: true }
      )
      yield* Effect.sleep("20 millis")
      releasedAt = performance.now()
      yield* a.release(held.lease)
      latencies.push(yield* Fiber.join(waiter))
    }
    return latencies
  })

const claimRows = (url: string, dir: string, pairs: number) =>
  Effect.gen(function* () {
    const rows: Array<Record<string, unknown>> = []
    const sqliteFile = path.join(dir, "claims.db")
    const layers = {
      Postgres: () => PostgresLocks.layer(url, { pollEvery: "1 second" }),
      SQLite: () => SqliteLocks.layer(sqliteFile, { pollEvery: "5 millis" })
    }
    for (const [name, layer] of Object.entries(layers)) {
      const locks = yield* locksOf(layer())
      for (const hot of [true, false]) {
        const ms = yield* grants(locks, pairs, hot)
        rows.push({
          case: `claim grants, ${pairs} acquire+release, 4 fibers`,
          what: `${name}, ${hot ? "one hot key" : "64 disjoint keys"}`,
          grantsPerSec: Math.round(pairs / (ms / 1000)),
          meanMs: round(ms / pairs, 3)
        })
      }
      const latencies = yield* wakeUps([yield* locksOf(layer()), yield* locksOf(layer())], 20)
      rows.push({
        case: "wake-up after a release, other service, 20 samples",
        what: `${name}${name === "Postgres" ? " (NOTIFY; target p50 <= 10 ms)" : " (polling every 5 ms)"}`,
        p50Ms: round(median(latencies)),
        maxMs: round(Math.max(...latencies))
      })
    }
    return rows
  })

/** The scenario: a table of figures (run once; this machine's timings are noise). */
export const cluster = async (options: { readonly quick: boolean }): Promise<Array<Record<string, unknown>>> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-cluster-bench-"))
  const program = Effect.gen(function* () {
    const server = yield* Effect.orDie(TestServer.start())
    const url = yield* Effect.orDie(server.createDatabase())
    yield* startRunner(url, 64)
    yield* settled(url, 1)
    const n = options.quick ? 200 : 1000
    return [
      ...(yield* dispatch(url, path.join(dir, "dispatch.db"), n)),
      ...(yield* throughput(server, options.quick ? 96 : 1000, 200)),
      ...(yield* claimRows(yield* Effect.orDie(server.createDatabase()), dir, options.quick ? 400 : 2000)),
      figure("failover (runner SIGKILL to agents running elsewhere)", "not measured yet", Number.NaN, "")
    ]
  })
  try {
    return await Effect.runPromise(Effect.scoped(program))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
