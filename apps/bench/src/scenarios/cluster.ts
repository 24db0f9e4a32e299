/**
 * `pnpm bench cluster`: distributed runs against a throwaway Postgres the scenario starts itself.
 *
 * 1. Dispatch overhead per no-op agent: in process, with SQLite-shared and Postgres claims, and
 *    through a cluster of one runner process (target <= 2 ms per agent), with the CPU time every
 *    process spent per agent (this process, the runner, the Postgres backends).
 * 2. Throughput of agents sleeping 200 ms with 1, 2 and 4 runner processes of capacity 8 (target: 4
 *    runners >= 3.6x one), with the coordinator's concurrency at the runners' total capacity and with
 *    every agent dispatched at once (the runners queue what exceeds their capacity).
 * 3. Claim grants per second on one hot key and on 64 disjoint keys, Postgres against SQLite, and the
 *    wake-up latency of a waiter in another service after a release (Postgres NOTIFY, target p50 <= 10 ms).
 * 4. Failover: time from a runner's SIGKILL to its agents running on the other runner, against the
 *    shard lock expiration (target <= TTL + 1 s).
 *
 * The machine is shared: wall-clock figures move between runs; compare rows of one run.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Cluster } from "@corral/cluster"
import { Agent, AgentKind, Claims, Corral, Executor, ResourceLocks } from "@corral/core"
import { SqliteLocks } from "@corral/platform-node"
import { PostgresClient, PostgresLocks, TestServer } from "@corral/postgres"
import { Context, Duration, Effect, Fiber, Layer, Result, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { recordsTable } from "../format.ts"
import { childrenOf, processCpuMs } from "../lib/cpu.ts"
import { balanced, type RunnerProcess, runnerProcess } from "../../../../packages/cluster/test/support/runnerProcess.ts"
import { Mark, Sleep } from "../lib/clusterKinds.ts"
import type { Verdict } from "../types.ts"
// the coordinator's placement policy, driven in virtual time below (internal to @corral/cluster)
import { Placement, type Ticket } from "../../../../packages/cluster/src/internal/placement.ts"

const runnerScript = new URL("../lib/clusterRunner.ts", import.meta.url).pathname

type BenchRunner = RunnerProcess

const startRunner = (url: string, capacity: number) => runnerProcess(runnerScript, url, capacity)

const startRunners = (url: string, count: number, capacity: number) =>
  Effect.tap(
    Effect.all(
      Array.from({ length: count }, () => startRunner(url, capacity)),
      { concurrency: "unbounded" }
    ),
    (runners) => balanced(url, runners)
  )

const clusterExecutor = (url: string) =>
  Effect.map(Layer.build(Layer.orDie(Cluster.layerExecutor({ url }))), (context) =>
    Context.get(context, Executor.Executor)
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

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** CPU milliseconds (user + system) a process has used, from /proc; 0 where /proc is missing. */
/** CPU time per process group over `effect`: this process, the runners, and the Postgres backends. */
const withCpu = <A, E, R>(
  server: TestServer.TestServer,
  runners: ReadonlyArray<number>,
  effect: Effect.Effect<A, E, R>
) =>
  Effect.gen(function* () {
    const backends = () => childrenOf(server.pid).reduce((sum, pid) => sum + processCpuMs(pid), 0)
    const runnersCpu = () => runners.reduce((sum, pid) => sum + processCpuMs(pid), 0)
    const self = process.cpuUsage()
    const pg = backends()
    const run = runnersCpu()
    const value = yield* effect
    const used = process.cpuUsage(self)
    return {
      value,
      cpu: { self: (used.user + used.system) / 1000, runners: runnersCpu() - run, postgres: backends() - pg }
    }
  })

type Cpu = { readonly self: number; readonly runners: number; readonly postgres: number }

const dispatchRow = (approach: string, n: number, ms: number, cpu: Cpu) => ({
  approach,
  perAgentMs: round(ms / n, 3),
  cpuMsPerAgent: round((cpu.self + cpu.runners + cpu.postgres) / n, 2),
  "cpu: here / runner / postgres": `${round(cpu.self / n, 2)} / ${round(cpu.runners / n, 2)} / ${round(cpu.postgres / n, 2)}`
})

/** Whether the server's `pg_stat_statements` extension can be preloaded (Debian ships it with the server). */
const hasStatementStats = (): boolean => {
  const found = TestServer.findBinaries()
  return found._tag === "Found" && fs.existsSync(path.join(found.bin, "..", "lib", "pg_stat_statements.so"))
}

/**
 * Statements the server executed while `effect` ran, per agent, by statement (from
 * `pg_stat_statements`, every process's connections to the database of `url`); `undefined` rows when
 * the extension is not loaded.
 */
const withStatements = <A, E, R>(url: string, n: number, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ready = yield* Effect.exit(
      Effect.andThen(sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`, sql`SELECT pg_stat_statements_reset()`)
    )
    const value = yield* effect
    if (ready._tag === "Failure") return { value, rows: undefined }
    const stats = yield* sql<{ query: string; calls: string; ms: number }>`SELECT query, calls,
      total_exec_time AS ms FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY calls DESC`
    const rows = stats
      .filter((row) => !/pg_stat_statements/.test(row.query))
      .map((row) => {
        const text = row.query.replace(/\s+/g, " ").trim()
        return {
          statement: text.length > 90 ? `${text.slice(0, 87)}...` : text,
          of: /corral_/.test(text) ? "corral" : /cluster_/.test(text) ? "effect/cluster" : "other",
          perAgent: round(Number(row.calls) / n, 2),
          execMsPerAgent: round(row.ms / n, 3)
        }
      })
      .filter((row) => row.perAgent >= 0.01)
    return { value, rows }
  }).pipe(Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })), Effect.orDie)

const dispatch = (server: TestServer.TestServer, sqliteFile: string, n: number) =>
  Effect.gen(function* () {
    const rows: Array<Record<string, unknown>> = []
    const measure = <E, R>(
      approach: string,
      count: number,
      runners: ReadonlyArray<number>,
      run: Effect.Effect<number, E, R>
    ) =>
      Effect.map(withCpu(server, runners, run), ({ value, cpu }) => {
        const row = dispatchRow(approach, count, value, cpu)
        rows.push(row)
        return row
      })
    yield* measure("in process (Agent.make), concurrency 8", n, [], timedRun(noopAgents(n, false), 8))
    yield* measure(
      "in process, registered kind (Executor.layerLocal), concurrency 8",
      n,
      [],
      timedRun(kindAgents(n, 0), 8).pipe(Effect.provide(Executor.layerLocal([Sleep])))
    )
    const sqlite = yield* locksOf(SqliteLocks.layer(sqliteFile))
    yield* measure(
      "in process + SQLite-shared claims, concurrency 8",
      n,
      [],
      timedRun(noopAgents(n, true), 8).pipe(Effect.provideService(ResourceLocks.ResourceLocks, sqlite))
    )
    const url = yield* Effect.orDie(server.createDatabase())
    const pg = yield* locksOf(PostgresLocks.layer(url))
    yield* measure(
      "in process + Postgres claims, concurrency 8",
      n,
      [],
      timedRun(noopAgents(n, true), 8).pipe(Effect.provideService(ResourceLocks.ResourceLocks, pg))
    )
    const [runner] = yield* startRunners(url, 1, 64)
    const executor = yield* clusterExecutor(url)
    const onCluster = <E, R>(effect: Effect.Effect<number, E, R>) =>
      Effect.provideService(effect, Executor.Executor, executor)
    yield* onCluster(timedRun(kindAgents(64, 0, "warm"), 64))
    const profiled = yield* withStatements(
      url,
      n,
      measure(
        "cluster on Postgres, 1 runner, concurrency 64",
        n,
        [runner!.child.pid!],
        onCluster(timedRun(kindAgents(n, 0), 64))
      )
    )
    const cluster = profiled.value
    const statements = profiled.rows
    const one = Math.min(n, 50)
    yield* measure(
      "cluster on Postgres, 1 runner, one agent at a time (latency)",
      one,
      [runner!.child.pid!],
      onCluster(timedRun(kindAgents(one, 0, "seq"), 1))
    )
    const verdict: Verdict = {
      target: "cluster dispatch <= 2 ms per no-op agent (1 runner, concurrency 64)",
      figure: `${cluster.perAgentMs} ms per agent (${cluster.cpuMsPerAgent} ms CPU per agent over all processes)`,
      met: cluster.perAgentMs <= 2
    }
    return { rows, statements, verdicts: [verdict] }
  })

/** A string hash like `effect/cluster`'s (which is internal), for the simulation's shards. */
const hashString = (text: string) => {
  let h = 5381
  for (let i = text.length; i > 0; ) h = Math.imul(h, 33) ^ text.charCodeAt(--i)
  return (h & 0xbfffffff) | ((h >>> 1) & 0x40000000)
}

/**
 * The placement policy alone, in virtual time with no overhead: `n` agents of `ms` each on runners of
 * `capacity`, shards 1..300 dealt round-robin. `hash`: each agent runs on its shard's runner (queued
 * behind its capacity), as `effect/cluster` routes without corral's placement; `load`: the
 * coordinator's real `Placement` picks the runner and the salt, and an agent waits while all are full.
 * Returns the makespan.
 */
const simulate = (
  mode: "hash" | "load",
  runners: number,
  n: number,
  ms: number,
  capacity: number,
  concurrency: number
) => {
  const shardOf = (id: string) => Math.abs(hashString(id) % 300) + 1
  const ownerOf = (shard: number) => (shard - 1) % runners
  const placement = new Placement((id) => shardOf(id))
  placement.setView(
    Array.from({ length: runners }, (_, r) => ({
      address: `r${r}`,
      capacity,
      shards: { default: Array.from({ length: 300 }, (_, i) => i + 1).filter((s) => ownerOf(s) === r) }
    }))
  )
  const running = new Array<number>(runners).fill(0)
  const queued = Array.from({ length: runners }, () => [] as Array<number>)
  // finish events (time, runner, ticket), kept sorted by time
  const events: Array<{ at: number; runner: number; ticket?: Ticket }> = []
  const schedule = (event: { at: number; runner: number; ticket?: Ticket }) => {
    let i = events.length
    while (i > 0 && events[i - 1]!.at > event.at) i--
    events.splice(i, 0, event)
  }
  let now = 0
  let next = 0
  let inFlight = 0
  const dispatch = () => {
    while (inFlight < concurrency && next < n) {
      if (mode === "hash") {
        const runner = ownerOf(shardOf(`sim/a${next}`))
        if (running[runner]! < capacity) {
          running[runner]!++
          schedule({ at: now + ms, runner })
        } else queued[runner]!.push(next)
      } else {
        const agent = next
        const ticket = placement.tryPlace("default", (salt) => `sim/a${agent}~${salt}`)
        if (ticket === "full") return
        schedule({ at: now + ms, runner: Number(ticket.runner!.slice(1)), ticket })
      }
      next++
      inFlight++
    }
  }
  dispatch()
  while (events.length > 0) {
    const event = events.shift()!
    now = event.at
    inFlight--
    if (event.ticket !== undefined) placement.release(event.ticket)
    else if (queued[event.runner]!.shift() !== undefined) schedule({ at: now + ms, runner: event.runner })
    else running[event.runner]!--
    dispatch()
  }
  return now
}

const policy = (n: number, ms: number) => {
  const rows: Array<Record<string, unknown>> = []
  for (const concurrency of ["runners x capacity", "all dispatched at once"] as const) {
    for (const mode of ["hash", "load"] as const) {
      const at = (count: number) =>
        simulate(mode, count, n, ms, 8, concurrency === "all dispatched at once" ? n : count * 8)
      const one = at(1)
      rows.push({
        policy: mode === "hash" ? "shard hash (effect/cluster alone)" : "load-aware (corral's Placement)",
        coordinator: concurrency,
        "2 runners x one": round(one / at(2)),
        "4 runners x one": round(one / at(4))
      })
    }
  }
  return rows
}

const throughput = (server: TestServer.TestServer, n: number, ms: number) =>
  Effect.gen(function* () {
    const rows: Array<Record<string, unknown>> = []
    const modes = [
      { name: "concurrency = runners x capacity", concurrency: (count: number) => count * 8 },
      { name: "all dispatched at once", concurrency: () => n }
    ]
    const elapsed = new Map<string, number>()
    for (const count of [1, 2, 4]) {
      yield* Effect.scoped(
        Effect.gen(function* () {
          const url = yield* Effect.orDie(server.createDatabase())
          yield* startRunners(url, count, 8)
          const executor = yield* clusterExecutor(url)
          yield* timedRun(kindAgents(count * 8, 0, "warm"), count * 8).pipe(
            Effect.provideService(Executor.Executor, executor)
          )
          for (const [index, mode] of modes.entries()) {
            const wall = yield* timedRun(kindAgents(n, ms, `m${index}-`), mode.concurrency(count)).pipe(
              Effect.provideService(Executor.Executor, executor)
            )
            elapsed.set(`${mode.name}/${count}`, wall)
          }
        })
      )
    }
    const verdicts: Array<Verdict> = []
    for (const mode of modes) {
      const one = elapsed.get(`${mode.name}/1`)!
      for (const count of [1, 2, 4]) {
        const wall = elapsed.get(`${mode.name}/${count}`)!
        rows.push({
          coordinator: mode.name,
          runners: count,
          ms: Math.round(wall),
          floorMs: Math.round((n * ms) / (count * 8)),
          "x floor": round(wall / ((n * ms) / (count * 8))),
          "x one runner": round(one / wall)
        })
      }
      const speedup = round(one / elapsed.get(`${mode.name}/4`)!)
      verdicts.push({
        target: `4 runners >= 3.6x one runner (${n} agents x ${ms} ms, capacity 8, ${mode.name})`,
        figure: `${speedup}x`,
        met: speedup >= 3.6
      })
    }
    return { rows, policyRows: policy(n, ms), verdicts }
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

/** From the start of a release in one service to the grant of the waiter in another. */
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

const claims = (url: string, dir: string, pairs: number, samples: number) =>
  Effect.gen(function* () {
    const grantRows: Array<Record<string, unknown>> = []
    const wakeRows: Array<Record<string, unknown>> = []
    const verdicts: Array<Verdict> = []
    const sqliteFile = path.join(dir, "claims.db")
    const layers = {
      // polling once a second, so that a wake-up within it can only come from NOTIFY
      "Postgres (NOTIFY; polls every 1 s)": () => PostgresLocks.layer(url, { pollEvery: "1 second" }),
      "SQLite (polls every 5 ms)": () => SqliteLocks.layer(sqliteFile, { pollEvery: "5 millis" })
    }
    for (const [name, layer] of Object.entries(layers)) {
      const locks = yield* locksOf(layer())
      for (const hot of [true, false]) {
        const ms = yield* grants(locks, pairs, hot)
        grantRows.push({
          service: name.split(" ")[0],
          keys: hot ? "one hot key" : "64 disjoint keys",
          grantsPerSec: Math.round(pairs / (ms / 1000)),
          meanMs: round(ms / pairs, 3)
        })
      }
      const latencies = yield* wakeUps([yield* locksOf(layer()), yield* locksOf(layer())], samples)
      const p50 = round(median(latencies))
      wakeRows.push({ service: name, samples, p50Ms: p50, maxMs: round(Math.max(...latencies)) })
      if (name.startsWith("Postgres"))
        verdicts.push({
          target: "wake-up after a release p50 <= 10 ms (Postgres NOTIFY, waiter in another service)",
          figure: `${p50} ms`,
          met: p50 <= 10
        })
    }
    return { grantRows, wakeRows, verdicts }
  })

interface Start {
  readonly agent: string
  readonly pid: number
  readonly at: number
}

const readStarts = (file: string): Array<Start> => {
  try {
    return fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line))
  } catch {
    return []
  }
}

const waitFor = (done: () => boolean) =>
  Effect.suspend(() => (done() ? Effect.void : Effect.fail("not yet"))).pipe(
    Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 12_000 }),
    Effect.orDie
  )

/**
 * Two runners, 8 agents spread over them by shard; once all have started, the runner with the most
 * is killed with SIGKILL. Measures the time until each of its agents has started again on the other.
 */
const failoverOnce = (server: TestServer.TestServer, dir: string, round_: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server.createDatabase())
      const log = path.join(dir, `failover-${round_}.log`)
      const runners = yield* startRunners(url, 2, 8)
      const executor = yield* clusterExecutor(url)
      const agents = Array.from({ length: 8 }, (_, i) =>
        AgentKind.agent(Mark, `f${i}`, { agent: `f${i}`, ms: 3000, log })
      )
      const run = yield* Effect.forkChild(
        Corral.run(agents, { concurrency: 8 }).pipe(Effect.provideService(Executor.Executor, executor)),
        { startImmediately: true }
      )
      yield* waitFor(() => new Set(readStarts(log).map((s) => s.agent)).size === 8)
      const started = readStarts(log)
      const count = (runner: BenchRunner) => started.filter((s) => s.pid === runner.child.pid).length
      const [victim, survivor] = [...runners].sort((a, b) => count(b) - count(a))
      const moved = started.filter((s) => s.pid === victim!.child.pid).map((s) => s.agent)
      const killedAt = Date.now()
      victim!.child.kill("SIGKILL")
      const restarted = () =>
        moved.map((agent) => readStarts(log).find((s) => s.agent === agent && s.pid === survivor!.child.pid))
      yield* waitFor(() => restarted().every((s) => s !== undefined))
      const result = yield* Fiber.join(run)
      if (!result.allSucceeded) return yield* Effect.die(new Error("an agent did not succeed after the failover"))
      const times = restarted().map((s) => s!.at - killedAt)
      return { agents: moved.length, first: Math.min(...times), last: Math.max(...times) }
    })
  )

const failover = (server: TestServer.TestServer, dir: string, reps: number) =>
  Effect.gen(function* () {
    const ttl = Duration.toMillis(Duration.fromInputUnsafe(Cluster.defaults.shardLockExpiration))
    const rounds: Array<{ agents: number; first: number; last: number }> = []
    for (let i = 0; i < reps; i++) rounds.push(yield* failoverOnce(server, dir, i))
    const rows = rounds.map((r, i) => ({
      round: i + 1,
      agentsMoved: r.agents,
      "SIGKILL to first re-start ms": r.first,
      "SIGKILL to last re-start ms": r.last,
      "shard lock expiration (TTL) ms": ttl
    }))
    const last = median(rounds.map((r) => r.last))
    const verdict: Verdict = {
      target: `failover <= TTL + 1 s (SIGKILL to every agent running elsewhere; TTL ${ttl / 1000} s)`,
      figure: `${(last / 1000).toFixed(2)} s (median of ${reps})`,
      met: last <= ttl + 1000
    }
    return { rows, verdicts: [verdict] }
  })

const section = (title: string, rows: ReadonlyArray<Record<string, unknown>>) => `-- ${title} --\n${recordsTable(rows)}`

/** The scenario: tables per item and the verdict on each target (run once; this machine's timings are noise). */
export const cluster = async (options: {
  readonly quick: boolean
}): Promise<{ readonly text: string; readonly targets: ReadonlyArray<Verdict>; readonly data: unknown }> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-cluster-bench-"))
  const sizes = options.quick
    ? { dispatch: 200, throughput: 192, pairs: 400, wake: 20, failover: 1 }
    : { dispatch: 1000, throughput: 1000, pairs: 2000, wake: 50, failover: 3 }
  const program = Effect.gen(function* () {
    const server = yield* Effect.orDie(
      TestServer.start(
        hasStatementStats()
          ? { settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" } }
          : {}
      )
    )
    const d = yield* Effect.scoped(dispatch(server, path.join(dir, "dispatch.db"), sizes.dispatch))
    const t = yield* throughput(server, sizes.throughput, 200)
    const c = yield* claims(yield* Effect.orDie(server.createDatabase()), dir, sizes.pairs, sizes.wake)
    const f = yield* failover(server, dir, sizes.failover)
    const text = [
      section(`dispatch, ${sizes.dispatch} no-op agents (CPU: ms per agent, all processes)`, d.rows),
      d.statements === undefined
        ? "(statements per agent: pg_stat_statements is not available)"
        : section(
            `statements Postgres executed per no-op agent (1 runner, concurrency 64; ${d.statements.reduce((n, r) => n + r.perAgent, 0).toFixed(1)} in all)`,
            d.statements
          ),
      section(`throughput, ${sizes.throughput} agents x 200 ms, capacity 8 per runner`, t.rows),
      section(
        `placement policy alone: ${sizes.throughput} agents x 200 ms, capacity 8, virtual time, no overhead`,
        t.policyRows
      ),
      section(`claim grants, ${sizes.pairs} acquire+release, 4 fibers`, c.grantRows),
      section("wake-up of a waiter in another service after a release", c.wakeRows),
      section("failover after a runner's SIGKILL (2 runners, 8 agents)", f.rows),
      "The machine may be shared: compare rows of one run, not figures across runs."
    ].join("\n\n")
    return {
      text,
      targets: [...d.verdicts, ...t.verdicts, ...c.verdicts, ...f.verdicts],
      data: {
        dispatch: d.rows,
        statements: d.statements,
        throughput: t.rows,
        placementPolicy: t.policyRows,
        grants: c.grantRows,
        wakeUps: c.wakeRows,
        failover: f.rows
      }
    }
  })
  try {
    return await Effect.runPromise(Effect.scoped(program))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
