import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { AgentKind, Corral, Executor } from "@corral/core"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Fiber, Layer, Logger, References, Schedule } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { sharedServer } from "../../postgres/test/support/server.ts"
import { PostgresClient, PostgresOptions } from "@corral/postgres"
import * as Cluster from "../src/Cluster.ts"
import * as RunnerServe from "../src/Runner.ts"
import * as RunnerRegistry from "../src/RunnerRegistry.ts"
import { Probe } from "./support/kinds.ts"
import { balanced, type RunnerProcess, runnerProcess as startRunner } from "./support/runnerProcess.ts"

const server = await sharedServer()

const dir = mkdtempSync(join(tmpdir(), "corral-cluster-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

interface LogLine {
  readonly event: "start" | "end" | "exit"
  readonly agent: string
  readonly pid: number
  readonly at: number
  readonly token?: number
}

const readLog = (file: string): Array<LogLine> => {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line))
  } catch {
    return []
  }
}

/** Waits until `file` satisfies `done`. */
const waitForLog = (file: string, done: (lines: Array<LogLine>) => boolean) =>
  Effect.suspend(() => (done(readLog(file)) ? Effect.void : Effect.fail("not yet"))).pipe(
    Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 1200 }),
    Effect.orDie
  )

/** The agents that started (on the runner `pid`, when given): re-deliveries count once. */
const startedAgents = (lines: ReadonlyArray<LogLine>, pid?: number) =>
  new Set(lines.filter((l) => l.event === "start" && (pid === undefined || l.pid === pid)).map((l) => l.agent))

const runnerScript = fileURLToPath(new URL("./support/runner.ts", import.meta.url))

type Runner = RunnerProcess

/** A runner process, killed with the scope. */
const runnerProcess = (url: string, capacity = 8, labels = "") => startRunner(runnerScript, url, capacity, labels)

/**
 * The runners ordered by how many agents they started, most first. Agents land on runners by
 * shard, so which runner holds any agent is not known before the run: the victim of a fault test
 * is the runner that has agents, the survivor the other one.
 */
const busiestFirst = (runners: ReadonlyArray<Runner>, lines: ReadonlyArray<LogLine>): Array<Runner> => {
  const started = (runner: Runner) => lines.filter((l) => l.event === "start" && l.pid === runner.child.pid).length
  return [...runners].sort((a, b) => started(b) - started(a))
}

describe.skipIf(server === undefined)("Cluster", () => {
  it.live(
    "a coordinator's agents run on several runner processes, with the same outcomes as a local run",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const runners = yield* Effect.all([runnerProcess(url), runnerProcess(url)], { concurrency: "unbounded" })
        yield* balanced(url, runners)
        // 16 agents that wait to be released, on two runners of capacity 8: placement by load puts
        // 8 on each, so both run agents whatever the shards
        const log = join(dir, "several.log")
        const release = join(dir, "several.release")
        const agents = Array.from({ length: 16 }, (_, i) =>
          AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 0, log, release })
        )
        const run = yield* Effect.forkChild(
          Corral.run(agents, { runId: "cluster-1", concurrency: 16 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        yield* waitForLog(log, (lines) => startedAgents(lines).size === 16)
        writeFileSync(release, "")
        const result = yield* Fiber.join(run)
        const pids = new Set<number>()
        for (const agent of agents) {
          const outcome = result.get(agent.id)!
          assert.strictEqual(outcome._tag, "Succeeded", `${agent.id}: ${JSON.stringify(outcome)}`)
          if (outcome._tag === "Succeeded") pids.add((outcome.value as { pid: number }).pid)
        }
        assert.deepStrictEqual(
          [...pids].sort(),
          runners.map((runner) => runner.child.pid!).sort(),
          "both runners executed agents, and only runners did"
        )
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a runner executes at most its capacity of agents at once, across entities",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "capacity.log")
        const runner = yield* runnerProcess(url, 2)
        yield* balanced(url, [runner])
        const agents = Array.from({ length: 6 }, (_, i) => AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 300, log }))
        const result = yield* Corral.run(agents, { runId: "cluster-capacity", concurrency: 6 }).pipe(
          Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
        )
        assert.isTrue(result.allSucceeded)
        const lines = readLog(log)
        const intervals = agents.map((agent) => ({
          start: lines.find((l) => l.event === "start" && l.agent === agent.id)!.at,
          end: lines.find((l) => l.event === "end" && l.agent === agent.id)!.at
        }))
        const most = Math.max(
          ...intervals.map(({ start }) => intervals.filter((other) => other.start <= start && other.end > start).length)
        )
        assert.isAtMost(most, 2, `at most 2 agents ran at once on a runner of capacity 2 (${most} did)`)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a runner killed with SIGKILL mid-agent: its agents run again on another runner and every agent ends with one outcome",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "sigkill.log")
        const release = join(dir, "sigkill.release")
        const runners = yield* Effect.all([runnerProcess(url), runnerProcess(url)], { concurrency: "unbounded" })
        yield* balanced(url, runners)
        // every agent waits for `release`, written only after the kill: none can end on the victim first
        const agents = Array.from({ length: 8 }, (_, i) =>
          AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 0, log, release })
        )
        const run = yield* Effect.forkChild(
          Corral.run(agents, { runId: "cluster-kill", concurrency: 8 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        yield* waitForLog(
          log,
          (lines) => new Set(lines.filter((l) => l.event === "start").map((l) => l.agent)).size === 8
        )
        const [victim, survivor] = busiestFirst(runners, readLog(log))
        const onVictim = new Set(
          readLog(log)
            .filter((l) => l.event === "start" && l.pid === victim!.child.pid)
            .map((l) => l.agent)
        )
        assert.isAbove(onVictim.size, 0, "the victim was running agents")
        victim!.child.kill("SIGKILL")
        writeFileSync(release, "")
        const result = yield* Fiber.join(run)
        for (const agent of agents) {
          const outcome = result.get(agent.id)!
          assert.strictEqual(outcome._tag, "Succeeded", `${agent.id}: ${JSON.stringify(outcome)}`)
          if (outcome._tag === "Succeeded") {
            assert.strictEqual(
              (outcome.value as { pid: number }).pid,
              survivor!.child.pid,
              `${agent.id} ended on the survivor`
            )
          }
        }
        const lines = readLog(log)
        for (const agent of onVictim) {
          const starts = lines.filter((l) => l.event === "start" && l.agent === agent).map((l) => l.pid)
          assert.deepStrictEqual(
            starts,
            [victim!.child.pid, survivor!.child.pid],
            `${agent} was re-run once, elsewhere`
          )
          assert.isFalse(
            lines.some((l) => l.event === "end" && l.agent === agent && l.pid === victim!.child.pid),
            `${agent} never finished on the victim`
          )
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a runner stopped (SIGSTOP) past its shard lock expiration loses its agents to another runner; resumed, its stale executions are fenced",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "sigstop.log")
        const release = join(dir, "sigstop.release")
        const runners = yield* Effect.all([runnerProcess(url), runnerProcess(url)], { concurrency: "unbounded" })
        yield* balanced(url, runners)
        // every agent waits for `release`, written while the victim is stopped: none can end before
        const agents = Array.from({ length: 6 }, (_, i) =>
          AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 0, log, release })
        )
        const run = yield* Effect.forkChild(
          Corral.run(agents, { runId: "cluster-stop", concurrency: 6 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        yield* waitForLog(
          log,
          (lines) => new Set(lines.filter((l) => l.event === "start").map((l) => l.agent)).size === 6
        )
        const [victim, survivor] = busiestFirst(runners, readLog(log))
        const stale = readLog(log).filter((l) => l.event === "start" && l.pid === victim!.child.pid)
        const onVictim = new Set(stale.map((l) => l.agent))
        assert.isAbove(onVictim.size, 0, "the victim was running agents")
        victim!.child.kill("SIGSTOP")
        yield* Effect.addFinalizer(() => Effect.sync(() => victim!.child.kill("SIGCONT")))
        yield* waitForLog(log, (lines) =>
          [...onVictim].every((agent) =>
            lines.some((l) => l.event === "start" && l.agent === agent && l.pid === survivor!.child.pid)
          )
        )
        writeFileSync(release, "")
        victim!.child.kill("SIGCONT")
        const result = yield* Fiber.join(run)
        for (const agent of agents) {
          const outcome = result.get(agent.id)!
          assert.strictEqual(outcome._tag, "Succeeded", `${agent.id}: ${JSON.stringify(outcome)}`)
        }
        // the stale executions woke when the victim resumed: wait until each has ended (or its runner is
        // gone) before checking that none of them wrote
        yield* waitForLog(
          log,
          (lines) =>
            victim!.child.exitCode !== null ||
            victim!.child.signalCode !== null ||
            stale.every((start) =>
              lines.some((l) => l.event === "exit" && l.agent === start.agent && l.token === start.token)
            )
        )
        const written = readLog(log)
        for (const start of stale) {
          assert.isFalse(
            written.some((l) => l.event === "end" && l.agent === start.agent && l.token === start.token),
            `${start.agent}: the execution with fencing token ${start.token} made no late write`
          )
          const outcome = result.get(start.agent)!
          if (outcome._tag === "Succeeded")
            assert.isAbove(
              (outcome.value as { token: number }).token,
              start.token!,
              `${start.agent}'s outcome is a later execution's`
            )
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "Postgres restarted mid-run: runners and the coordinator reconnect and every agent ends with one outcome",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "restart.log")
        const runners = yield* Effect.all([runnerProcess(url), runnerProcess(url)], { concurrency: "unbounded" })
        yield* balanced(url, runners)
        const agents = Array.from({ length: 6 }, (_, i) => AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 2000, log }))
        const run = yield* Effect.forkChild(
          Corral.run(agents, { runId: "cluster-restart", concurrency: 6 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        yield* waitForLog(
          log,
          (lines) => new Set(lines.filter((l) => l.event === "start").map((l) => l.agent)).size === 6
        )
        yield* server!.kill
        yield* server!.restart
        const result = yield* Fiber.join(run)
        for (const agent of agents) {
          const outcome = result.get(agent.id)!
          assert.strictEqual(outcome._tag, "Succeeded", `${agent.id}: ${JSON.stringify(outcome)}`)
        }
        for (const runner of runners) assert.isTrue(runner.shards >= 0, "the runners are still alive")
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "agents that require a label run only on runners with it; the others run anywhere",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const [plain, gpu] = yield* Effect.all([runnerProcess(url), runnerProcess(url, 8, "gpu")], {
          concurrency: "unbounded"
        })
        yield* balanced(url, [plain!, gpu!])
        const missing = yield* Effect.flip(RunnerRegistry.check(["gpu", "cuda"])).pipe(
          Effect.provide(PostgresClient.layer(url, { maxConnections: 1 }))
        )
        assert.match(missing.message, /no runner online has the label "cuda" \(labels online: gpu\)/)
        yield* RunnerRegistry.check(["gpu"]).pipe(Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })))
        const needsGpu = Array.from({ length: 6 }, (_, i) =>
          AgentKind.agent(Probe, `gpu-${i}`, { sleepMs: 10 }, { requires: "gpu" })
        )
        // 16 agents that wait to be released, on runners of capacity 8 each: they fill both runners
        // (the gpu agents wait for a slot of the gpu runner meanwhile, or ran before)
        const log = join(dir, "labels.log")
        const release = join(dir, "labels.release")
        const any = Array.from({ length: 16 }, (_, i) =>
          AgentKind.agent(Probe, `any-${i}`, { sleepMs: 0, log, release })
        )
        const run = yield* Effect.forkChild(
          Corral.run([...needsGpu, ...any], { runId: "cluster-labels", concurrency: 22 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        yield* waitForLog(log, (lines) => startedAgents(lines).size === 16)
        writeFileSync(release, "")
        const result = yield* Fiber.join(run)
        const pidOf = (id: string) => {
          const outcome = result.get(id)!
          if (outcome._tag !== "Succeeded") return assert.fail(`${id}: ${JSON.stringify(outcome)}`)
          return (outcome.value as { pid: number }).pid
        }
        for (const agent of needsGpu)
          assert.strictEqual(pidOf(agent.id), gpu!.child.pid, `${agent.id} ran on the gpu runner`)
        assert.deepStrictEqual(
          new Set(any.map((agent) => pidOf(agent.id))),
          new Set([plain!.child.pid, gpu!.child.pid]),
          "agents without requirements ran on both runners"
        )
      }).pipe(Effect.scoped),
    120_000
  )
  it.live(
    "placement follows load: with capacities 1 and 3, four agents run at once, one on each free slot",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "placement.log")
        const release = join(dir, "placement.release")
        const [small, large] = yield* Effect.all([runnerProcess(url, 1), runnerProcess(url, 3)], {
          concurrency: "unbounded"
        })
        yield* balanced(url, [small!, large!])
        const agents = Array.from({ length: 4 }, (_, i) =>
          AgentKind.agent(Probe, `agent-${i}`, { sleepMs: 0, log, release })
        )
        const run = yield* Effect.forkChild(
          Corral.run(agents, { runId: "cluster-placement", concurrency: 4 }).pipe(
            Effect.provide(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
          ),
          { startImmediately: true }
        )
        // with shard-hash placement an agent waits behind the small runner's one slot while the
        // large runner has a free one, and the four never run at once
        yield* waitForLog(log, (lines) => startedAgents(lines).size === 4)
        const lines = readLog(log)
        assert.strictEqual(startedAgents(lines, small!.child.pid).size, 1, "one on the runner of capacity 1")
        assert.strictEqual(startedAgents(lines, large!.child.pid).size, 3, "three on the runner of capacity 3")
        writeFileSync(release, "")
        const result = yield* Fiber.join(run)
        assert.isTrue(result.allSucceeded)
      }).pipe(Effect.scoped),
    120_000
  )
  it.live(
    "an attempt waiting in the coordinator for a free slot can be interrupted (its timeout ends it while the slot stays taken)",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const log = join(dir, "waiting.log")
        const release = join(dir, "waiting.release")
        const runner = yield* runnerProcess(url, 1)
        yield* balanced(url, [runner])
        const context = yield* Layer.build(Cluster.layerExecutor({ url, shardLockExpiration: "6 seconds" }))
        const onCluster = <A, E>(effect: Effect.Effect<A, E, Executor.Executor>) =>
          Effect.provideService(effect, Executor.Executor, Context.get(context, Executor.Executor))
        const holder = yield* Effect.forkChild(
          onCluster(
            Corral.run([AgentKind.agent(Probe, "holder", { sleepMs: 0, log, release })], { runId: "cluster-waiting-1" })
          ),
          { startImmediately: true }
        )
        yield* waitForLog(log, (lines) => startedAgents(lines).size === 1)
        // the runner's one slot is taken until `release` exists: this agent waits in the coordinator
        const waiter = AgentKind.agent(Probe, "waiter", { sleepMs: 0, log }, { timeout: "300 millis" })
        const waited = yield* onCluster(Corral.run([waiter], { runId: "cluster-waiting-2" }))
        assert.strictEqual(waited.get("waiter")?._tag, "TimedOut")
        assert.deepStrictEqual([...startedAgents(readLog(log))], ["holder"], "the waiter never started")
        writeFileSync(release, "")
        assert.isTrue((yield* Fiber.join(holder)).allSucceeded)
      }).pipe(Effect.scoped),
    120_000
  )
})

describe.skipIf(server === undefined)("Cluster through an outage", () => {
  it.live(
    "a coordinator warns once per outage that it cannot read the runner registry, not at every refresh",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const lines: Array<string> = []
        const capture = Logger.make(({ message }) => {
          const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
          if (text.startsWith("corral: reading the runner registry")) lines.push(text)
        })
        const count = (what: string) => lines.filter((line) => line.includes(what)).length
        const seen = (what: string, n: number) =>
          Effect.suspend(() => (count(what) >= n ? Effect.void : Effect.fail("not yet"))).pipe(
            Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 1200 }),
            Effect.orDie
          )
        yield* Effect.gen(function* () {
          yield* Layer.build(Cluster.layerExecutor({ url, refreshEvery: "100 millis" }))
          for (const outage of [1, 2]) {
            yield* server!.kill
            yield* seen("failed", outage)
            // the outage goes on until 5 more refreshes have failed
            yield* seen("still fails", count("still fails") + 5)
            yield* server!.restart
            yield* seen("works again", outage)
          }
        }).pipe(
          Effect.provide(Logger.layer([capture])),
          Effect.provideService(References.MinimumLogLevel, "Debug"),
          Effect.scoped
        )
        assert.strictEqual(count("failed"), 2, lines.join("\n"))
        assert.isAtLeast(count("still fails"), 10, lines.join("\n"))
        assert.strictEqual(count("works again"), 2, lines.join("\n"))
      }),
    120_000
  )
})

describe.skipIf(server === undefined)("Cluster options", () => {
  it.live("settings it cannot use: building the layer dies with PostgresOptions.InvalidOption naming the option", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const kinds = Executor.layerKinds([Probe])
      const defectOf = <A, E>(layer: Layer.Layer<A, E>) =>
        Effect.map(Effect.exit(Effect.timeout(Effect.scoped(Layer.build(layer)), "5 seconds")), (exit) =>
          Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        )
      const executor = (options: Partial<Cluster.ClusterOptions>) => Cluster.layerExecutor({ url, ...options })
      const runner = (options: Partial<Cluster.RunnerOptions>) =>
        Cluster.layerRunner({ url, port: 9, ...options }).pipe(Layer.provide(kinds))
      // shared settings: both the coordinator's and the runner's layer refuse them
      const shared: ReadonlyArray<readonly [Partial<Cluster.ClusterOptions>, string]> = [
        [
          { shardLockExpiration: "soon" as never },
          'Cluster shardLockExpiration: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"'
        ],
        [{ shardLockExpiration: 0 }, "Cluster shardLockExpiration: must be a positive, finite duration, got 0"],
        [
          { shardLockExpiration: { seconds: true } as never },
          "Cluster shardLockExpiration: duration field seconds must be a number, got boolean"
        ],
        [
          { shardLockExpiration: {} as never },
          'Cluster shardLockExpiration: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}'
        ],
        [{ refreshEvery: Number.NaN }, "Cluster refreshEvery: must be a number of milliseconds, got NaN"],
        [{ refreshEvery: 0 }, "Cluster refreshEvery: must be a positive, finite duration, got 0"],
        [
          { refreshEvery: { milliseconds: "5" } as never },
          "Cluster refreshEvery: duration field milliseconds must be a number, got string"
        ]
      ]
      const runnerOnly: ReadonlyArray<readonly [Partial<Cluster.RunnerOptions>, string]> = [
        [{ port: 99999 }, "Cluster port: must be a whole number from 1 to 65535, got 99999"],
        [{ port: Number.NaN }, "Cluster port: must be a whole number from 1 to 65535, got NaN"],
        [{ capacity: 0 }, "Cluster capacity: must be a whole number from 1 up, got 0"],
        [{ capacity: Number.NaN }, "Cluster capacity: must be a whole number from 1 up, got NaN"],
        [{ labels: [""] }, 'Cluster labels: a label must not be empty, got ""'],
        [{ labels: ["gpu", " gpu"] }, 'Cluster labels: a label must not begin or end with a space, got " gpu"'],
        [{ labels: ["gpu#2"] }, 'Cluster labels: a label must not contain "#", "~" or ",", got "gpu#2"'],
        [{ labels: ["gpu~1"] }, 'Cluster labels: a label must not contain "#", "~" or ",", got "gpu~1"'],
        [{ labels: ["gpu,linux"] }, 'Cluster labels: a label must not contain "#", "~" or ",", got "gpu,linux"'],
        [{ labels: ["gpu", "gpu"] }, 'Cluster labels: "gpu" is given twice']
      ]
      const cases = [
        ...shared.flatMap(([options, message]) => [
          [defectOf(executor(options)), options, message] as const,
          [defectOf(runner(options)), options, message] as const
        ]),
        ...runnerOnly.map(([options, message]) => [defectOf(runner(options)), options, message] as const)
      ]
      for (const [build, options, message] of cases) {
        const defect = yield* build
        assert.instanceOf(defect, PostgresOptions.InvalidOption, JSON.stringify(options))
        assert.strictEqual((defect as Error).message, message)
      }
    })
  )

  it.live(
    "Runner.serve with a malformed label dies with PostgresOptions.InvalidOption before anything is registered",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.orDie(server!.createDatabase())
        const exit = yield* RunnerServe.serve({ url, port: 9, repo: dir, labels: [""] }, () => Effect.void).pipe(
          Effect.timeout("5 seconds"),
          Effect.exit
        )
        const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
        assert.instanceOf(defect, PostgresOptions.InvalidOption)
        assert.strictEqual((defect as Error).message, 'Runner labels: a label must not be empty, got ""')
        const tables = yield* Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = 'public' AND table_name LIKE 'corral_%'`
        ).pipe(Effect.provide(PostgresClient.layer(url)), Effect.orDie)
        assert.deepStrictEqual(tables, [], "it wrote nothing to the database")
      })
  )

  it.live("Runner.serve with a repo that is not a folder dies with PostgresOptions.InvalidOption before it joins", () =>
    Effect.gen(function* () {
      const url = yield* Effect.orDie(server!.createDatabase())
      const missing = join(dir, "no-such-repo")
      const exit = yield* RunnerServe.serve({ url, port: 9, repo: missing }, () => Effect.void).pipe(
        Effect.timeout("5 seconds"),
        Effect.exit
      )
      const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
      assert.instanceOf(defect, PostgresOptions.InvalidOption)
      assert.strictEqual((defect as Error).message, `Runner repo: not a folder: ${missing}`)
    })
  )
})
