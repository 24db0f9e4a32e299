/**
 * `corral run <plan> --cluster URL`: the plan is validated here and coordinated from this process;
 * each agent runs as a `corral/process` agent on a runner of the cluster, in that runner's `--repo`
 * (as with `isolation: none`). Claims are taken in Postgres (`PostgresLocks`) and the run is recorded
 * in Postgres (`PostgresLedger`). The live view, `--json` events, summary and exit codes are those of
 * a local run.
 *
 * Not supported with `--cluster` yet (exit 2): worktree or directory isolation (no workspaces across
 * machines), `--resume`/`--resume-from`, `--report`, `--keep-workspaces`.
 *
 * @since 0.1.0
 */
import * as NodeOs from "node:os"
import { Cluster, ProcessKind, RunnerRegistry } from "@corral/cluster"
import { Agent, AgentKind, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import { PostgresClient, PostgresLedger, PostgresLocks } from "@corral/postgres"
import { Context, Deferred, Effect, Layer, Option, Schedule } from "effect"
import { invalidInput } from "../CliExit.ts"
import { newRunId } from "../Paths.ts"
import * as PlanFile from "../PlanFile.ts"
import * as Reporter from "../Reporter.ts"
import type { RunEvent } from "../RunEvent.ts"
import type { AgentResult } from "../RunPlan.ts"
import { rateLimitsOf } from "../RunPlan.ts"
import * as Summary from "../Summary.ts"
import { interruptions } from "./run.ts"

/**
 * The flags of `corral run` that a cluster run reads.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClusterFlags {
  readonly plan: string
  readonly cluster: string
  readonly concurrency: Option.Option<number>
  readonly mode: Option.Option<"settle" | "fail-fast">
  readonly isolation: Option.Option<"worktree" | "directory" | "none">
  readonly json: boolean
  readonly keepWorkspaces: boolean
  readonly resume: boolean
  readonly resumeFrom: Option.Option<string>
  readonly report: boolean
}

const unsupported = (flags: ClusterFlags, plan: PlanFile.Plan): string | undefined => {
  const isolation = Option.getOrElse(flags.isolation, () => plan.isolation)
  if (isolation !== "none")
    return `${plan.file}: isolation ${isolation} is not supported with --cluster yet; agents run in each runner's --repo (set isolation: none or pass --isolation none)`
  if (flags.resume || Option.isSome(flags.resumeFrom)) return "--resume is not supported with --cluster yet"
  if (flags.report) return "--report is not supported with --cluster yet"
  if (flags.keepWorkspaces) return "--keep-workspaces has no meaning with --cluster (agents run without workspaces)"
  return undefined
}

const toAgent = (agent: PlanFile.PlanAgent) => {
  const kindAgent = AgentKind.agent(
    ProcessKind.ProcessKind,
    agent.id,
    { command: agent.run, shell: true, env: { ...agent.env } },
    {
      timeout: agent.timeoutMs,
      retry: agent.retries > 0 ? Schedule.recurs(agent.retries) : undefined,
      claims: { read: agent.claims.read, write: agent.claims.write, pools: agent.claims.pools },
      claimTimeout: agent.claimTimeoutMs,
      dependsOn: agent.dependsOn,
      estimate: agent.estimateMs,
      rateLimit: agent.rateLimit,
      labels: agent.labels,
      ...(agent.labels.requires === undefined ? {} : { requires: agent.labels.requires })
    }
  )
  const run = (deps: Agent.Deps) =>
    Effect.map(
      kindAgent.run(deps),
      (output): AgentResult => ({
        process: {
          exitCode: 0,
          durationMs: output.durationMs,
          tail: output.tail,
          usage: { cpuUserMs: 0, cpuSystemMs: 0, peakRssMb: 0 },
          droppedLines: 0
        },
        merge: "not merged",
        commit: undefined
      })
    )
  return Agent.make(kindAgent.id, {
    run,
    timeout: kindAgent.timeout,
    retry: kindAgent.retry,
    claims: kindAgent.claims,
    claimTimeout: kindAgent.claimTimeout,
    dependsOn: kindAgent.dependsOn,
    estimate: kindAgent.estimate,
    rateLimit: kindAgent.rateLimit,
    inputs: kindAgent.inputs,
    labels: kindAgent.labels
  })
}

/**
 * Runs the plan on the cluster; returns the exit code. Ctrl-C stops the run as a local one.
 *
 * @since 0.1.0
 * @category running
 */
export const execute = (flags: ClusterFlags) =>
  Effect.gen(function* () {
    const plan = yield* PlanFile.load(flags.plan).pipe(
      Effect.catchTag("PlanFileError", (error) => invalidInput(`invalid plan\n${error.message}`))
    )
    const problem = unsupported(flags, plan)
    if (problem !== undefined) return yield* invalidInput(problem)
    const client = yield* Layer.build(PostgresClient.layer(flags.cluster, { maxConnections: 2 })).pipe(
      Effect.catchTag("PostgresUnavailable", (error) => invalidInput(error.message))
    )
    const required = [
      ...new Set(plan.agents.flatMap((agent) => (agent.labels.requires === undefined ? [] : [agent.labels.requires])))
    ]
    yield* RunnerRegistry.check(required).pipe(
      Effect.provideContext(client),
      Effect.catchTag("NoRunner", (error) => invalidInput(error.message)),
      Effect.catchTags({
        SqlError: (error) => invalidInput(error.message),
        MigrationError: (error) => invalidInput(error.message)
      })
    )
    const ledger = yield* Layer.build(PostgresLedger.layer(flags.cluster)).pipe(
      Effect.map((context) => Context.get(context, RunLedger.RunLedger))
    )
    const runId = newRunId()
    const agents = plan.agents.map(toAgent)
    yield* ledger.startRun({
      runId,
      planFile: plan.file,
      planHash: plan.hash,
      options: { cluster: PostgresClient.redact(flags.cluster), isolation: "none" },
      pid: process.pid,
      hostname: NodeOs.hostname(),
      startedAt: Date.now(),
      agents: agents.map((agent) => ({ agentId: agent.id, dependsOn: agent.dependsOn }))
    })
    const mode = Reporter.modeFor(flags.json, process.stdout)
    const reporter = Reporter.make(mode, plan.agents)
    const stop = yield* Deferred.make<string>()
    yield* interruptions(stop, reporter)
    const result = yield* Corral.run(agents, {
      runId,
      concurrency: Option.getOrElse(flags.concurrency, () => plan.concurrency),
      mode: Option.getOrElse(flags.mode, () => plan.mode),
      pools: plan.pools,
      rateLimits: rateLimitsOf(plan),
      onEvent: (event) =>
        Effect.andThen(
          Effect.sync(() => reporter.onEvent(event as RunEvent)),
          Effect.ignore(ledger.record(runId, event))
        ),
      stopOn: Deferred.await(stop)
    }).pipe(
      Effect.provide(Cluster.layerExecutor({ url: flags.cluster })),
      Effect.provide(PostgresLocks.layer(flags.cluster)),
      Effect.ensuring(Effect.sync(reporter.close)),
      Effect.catchTag("InvalidRun", (error) => invalidInput(error.message))
    )
    const report = {
      runId,
      result,
      integrationBranch: undefined,
      integrationBase: undefined,
      integrationHead: undefined,
      logDir: "on each runner (not collected with --cluster)",
      keptWorkspaces: [],
      git: {}
    }
    yield* ledger.finishRun(
      runId,
      result.stopped?._tag === "Stopped" ? "interrupted" : result.allSucceeded ? "succeeded" : "failed",
      result.endedAt
    )
    const summary = Summary.render(report, { color: mode === "tty", columns: process.stdout.columns })
    if (mode === "json") process.stderr.write(`${summary}\n`)
    else process.stdout.write(`\n${summary}\n`)
    return Summary.exitCode(report)
  }).pipe(Effect.scoped)
