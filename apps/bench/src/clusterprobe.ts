/**
 * The cluster dispatch case of `pnpm bench cluster` alone, for A/B runs: one runner of capacity 64,
 * `rounds` rounds of `n` no-op agents at concurrency 64 after a warm-up of 64, each round's CPU per
 * agent of this process (the coordinator), the runner and the Postgres backends (from /proc), and
 * the statements Postgres executed per agent (`pg_stat_statements`).
 *
 *   node apps/bench/src/clusterprobe.ts [n=1000] [rounds=3]
 *
 * Environment: `IDLE=<s>` first measures the CPU per second of each process and the statements per
 * second while nothing runs, for `s` seconds; `STATEMENTS=1` prints each round's statements per
 * agent; `STRACE=<dir>` attaches `strace` (arguments `STRACE_ARGS`, default `-c`) to every process
 * for round 1 and writes its output and the processes' open files to `dir`; `PROFILE=1` stops the
 * runner with SIGTERM at the end (run with `NODE_OPTIONS="--cpu-prof --import <a file that exits on
 * SIGTERM>"` to get both processes' profiles).
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { Cluster } from "@corral/cluster"
import { AgentKind, Corral, Executor } from "@corral/core"
import { PostgresClient, TestServer } from "@corral/postgres"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { balanced, runnerProcess } from "../../../packages/cluster/test/support/runnerProcess.ts"
import { Sleep } from "./lib/clusterKinds.ts"
import { childrenOf, processCpuMs } from "./lib/cpu.ts"

const n = Number(process.argv[2] ?? 1000)
const rounds = Number(process.argv[3] ?? 3)
const runnerScript = new URL("./lib/clusterRunner.ts", import.meta.url).pathname

const run = (count: number, prefix: string) =>
  Effect.gen(function* () {
    const agents = Array.from({ length: count }, (_, i) => AgentKind.agent(Sleep, `${prefix}${i}`, { ms: 0 }))
    const result = yield* Corral.run(agents, { concurrency: 64 })
    const failed = result.outcomes.filter((outcome) => outcome._tag !== "Succeeded").length
    if (failed > 0) return yield* Effect.die(new Error(`${failed} agents did not succeed`))
  })

const program = Effect.gen(function* () {
  const server = yield* Effect.orDie(
    TestServer.start({
      settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" }
    })
  )
  const url = yield* Effect.orDie(server.createDatabase())
  const runner = yield* runnerProcess(runnerScript, url, 64)
  yield* balanced(url, [runner])
  const executor = Context.get(yield* Layer.build(Layer.orDie(Cluster.layerExecutor({ url }))), Executor.Executor)
  const sql = Context.get(
    yield* Layer.build(Layer.orDie(PostgresClient.layer(url, { maxConnections: 1 }))),
    SqlClient.SqlClient
  )
  yield* Effect.orDie(sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
  yield* Effect.provideService(run(64, "warm"), Executor.Executor, executor)
  if (process.env.IDLE !== undefined) {
    const seconds = Number(process.env.IDLE)
    const backends = () => childrenOf(server.pid).reduce((sum, pid) => sum + processCpuMs(pid), 0)
    yield* Effect.orDie(sql`SELECT pg_stat_statements_reset()`)
    const self0 = process.cpuUsage()
    const pg0 = backends()
    const runner0 = processCpuMs(runner.child.pid!)
    yield* Effect.sleep(`${seconds} seconds`)
    const used = process.cpuUsage(self0)
    const stats = yield* Effect.orDie(sql<{ query: string; calls: string }>`SELECT query, calls FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY calls DESC`)
    console.log(
      JSON.stringify({
        idleMsPerSecond: {
          coordinator: +((used.user + used.system) / 1000 / seconds).toFixed(2),
          runner: +((processCpuMs(runner.child.pid!) - runner0) / seconds).toFixed(2),
          postgres: +((backends() - pg0) / seconds).toFixed(2)
        },
        statementsPerSecond: +(stats.reduce((sum, row) => sum + Number(row.calls), 0) / seconds).toFixed(1)
      })
    )
    for (const row of stats.slice(0, 8))
      console.log(`  ${(Number(row.calls) / seconds).toFixed(2)}/s  ${row.query.replace(/\s+/g, " ").slice(0, 120)}`)
  }
  for (let round = 0; round < rounds; round++) {
    yield* Effect.orDie(sql`SELECT pg_stat_statements_reset()`)
    const backends = () => childrenOf(server.pid).reduce((sum, pid) => sum + processCpuMs(pid), 0)
    const self0 = process.cpuUsage()
    const pg0 = backends()
    const runner0 = processCpuMs(runner.child.pid!)
    const tracers =
      process.env.STRACE !== undefined && round === 1
        ? [
            ["coordinator", process.pid],
            ["runner", runner.child.pid!],
            ...childrenOf(server.pid).map((pid) => ["postgres", pid] as const)
          ].map(([name, pid]) =>
            spawn(
              "strace",
              [
                ...(process.env.STRACE_ARGS ?? "-c").split(" "),
                "-f",
                "-o",
                `${process.env.STRACE}/${name}.${pid}`,
                "-p",
                String(pid)
              ],
              {
                stdio: "ignore"
              }
            )
          )
        : []
    if (tracers.length > 0) {
      yield* Effect.sleep("2 seconds")
      for (const [name, pid] of [
        ["coordinator", process.pid],
        ["runner", runner.child.pid!]
      ] as const)
        fs.writeFileSync(
          `${process.env.STRACE}/fds-${name}`,
          fs
            .readdirSync(`/proc/${pid}/fd`)
            .map((fd) => {
              try {
                return `${fd} ${fs.readlinkSync(`/proc/${pid}/fd/${fd}`)}`
              } catch {
                return fd
              }
            })
            .join("\n")
        )
      fs.writeFileSync(`${process.env.STRACE}/tcp`, fs.readFileSync("/proc/net/tcp", "utf8"))
    }
    const start = performance.now()
    yield* Effect.provideService(run(n, `r${round}-`), Executor.Executor, executor)
    for (const tracer of tracers) tracer.kill("SIGINT")
    if (tracers.length > 0) yield* Effect.sleep("2 seconds")
    const wall = performance.now() - start
    const used = process.cpuUsage(self0)
    const self = (used.user + used.system) / 1000 / n
    const runnerCpu = (processCpuMs(runner.child.pid!) - runner0) / n
    const pg = (backends() - pg0) / n
    const stats = yield* Effect.orDie(sql<{ query: string; calls: string }>`SELECT query, calls FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY calls DESC`)
    const rows = stats.filter((row) => !/pg_stat_statements/.test(row.query))
    const statements = rows.reduce((sum, row) => sum + Number(row.calls), 0) / n
    console.log(
      JSON.stringify({
        round,
        wallMs: +(wall / n).toFixed(3),
        cpu: +(self + runnerCpu + pg).toFixed(3),
        coordinator: +self.toFixed(3),
        runner: +runnerCpu.toFixed(3),
        postgres: +pg.toFixed(3),
        statements: +statements.toFixed(2),
        load: fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]
      })
    )
    if (process.env.STATEMENTS !== undefined)
      for (const row of rows.slice(0, 25))
        console.log(`  ${(Number(row.calls) / n).toFixed(3)}  ${row.query.replace(/\s+/g, " ").slice(0, 150)}`)
  }
  if (process.env.PROFILE !== undefined) {
    runner.child.kill("SIGTERM")
    yield* Effect.sleep("3 seconds")
  }
})

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
