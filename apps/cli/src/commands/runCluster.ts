/**
 * `corral run <plan> --cluster URL`: the plan is validated here and coordinated from this process;
 * each agent runs as a `corral/process` agent on a runner of the cluster. With `isolation: worktree`
 * (the default) it runs in a worktree on its runner, started from the run's integration head
 * published to a git remote, and its work is merged back here (`ClusterWorkspaces`); with
 * `isolation: none` it runs in its runner's `--repo`. Claims are taken in Postgres (`PostgresLocks`)
 * and the run is recorded in Postgres (`PostgresLedger`). The live view, `--json` events, summary
 * and exit codes are those of a local run.
 *
 * Not supported with `--cluster` yet (exit 2): directory isolation, worktrees with `merge: none`,
 * `--resume`/`--resume-from`, `--report`, `--keep-workspaces`.
 *
 * @since 0.1.0
 */
import * as NodeOs from "node:os"
import { Cluster, ProcessKind, RunnerRegistry } from "@corral/cluster"
import { Agent, AgentKind, Corral } from "@corral/core"
import { RunLedger } from "@corral/platform-node"
import { PostgresClient, PostgresLedger, PostgresLocks } from "@corral/postgres"
import { Context, Deferred, Effect, Layer, Option, Schedule } from "effect"
import * as NodePath from "node:path"
import * as Git from "@corral/platform-node/Git"
import { Workspace } from "@corral/platform-node/Workspace"
import { invalidInput } from "../CliExit.ts"
import * as ClusterWorkspaces from "../ClusterWorkspaces.ts"
import { newRunId } from "../Paths.ts"
import * as PlanFile from "../PlanFile.ts"
import * as Reporter from "../Reporter.ts"
import type { RunEvent } from "../RunEvent.ts"
import type { AgentResult } from "../RunPlan.ts"
import { MergeConflict, rateLimitsOf } from "../RunPlan.ts"
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
  readonly repo: Option.Option<string>
  readonly remote: Option.Option<string>
}

const isolationOf = (flags: ClusterFlags, plan: PlanFile.Plan) =>
  Option.getOrElse(flags.isolation, () => plan.isolation)

const unsupported = (flags: ClusterFlags, plan: PlanFile.Plan): string | undefined => {
  const isolation = isolationOf(flags, plan)
  if (isolation === "directory")
    return `${plan.file}: isolation directory is not supported with --cluster; use worktree (a git repository) or none`
  if (isolation === "worktree" && plan.merge === "none")
    return `${plan.file}: merge: none is not supported with --cluster and worktree isolation (runners remove their worktrees when their agents end); use merge: auto or isolation: none`
  if (isolation === "none" && Option.isSome(flags.remote)) return "--remote is used only with worktree isolation"
  if (flags.resume || Option.isSome(flags.resumeFrom)) return "--resume is not supported with --cluster yet"
  if (flags.report) return "--report is not supported with --cluster yet"
  if (flags.keepWorkspaces)
    return "--keep-workspaces is not supported with --cluster (runners remove their worktrees; an agent's work is on its branch)"
  return undefined
}

/** The repository whose integration branch receives the work, and the remote runners reach; exit 2 when unusable. */
const workspaceTarget = (flags: ClusterFlags) =>
  Effect.gen(function* () {
    const repo = NodePath.resolve(Option.getOrElse(flags.repo, () => process.cwd()))
    const root = yield* Git.run(["rev-parse", "--show-toplevel"], { cwd: repo }).pipe(
      Effect.catch(() =>
        invalidInput(
          `${repo} is not a git repository (worktree isolation with --cluster merges into a git repository)\nuse --isolation none, or run corral inside a git repository`
        )
      )
    )
    const remote = yield* ClusterWorkspaces.remoteOf(root, Option.getOrUndefined(flags.remote)).pipe(
      Effect.catch((error) => invalidInput(`cannot create the run's remote: ${error.message}`))
    )
    yield* Git.run(["ls-remote", "--", remote, "HEAD"], { cwd: root }).pipe(
      Effect.catch((error) =>
        invalidInput(
          `--remote ${remote}: not a git repository corral can reach\n${"stderr" in error ? error.stderr : error.message}`
        )
      )
    )
    return { repo: root, remote }
  })

const toAgent = (agent: PlanFile.PlanAgent, workspaces: ClusterWorkspaces.ClusterWorkspaces | undefined) => {
  const input = { command: agent.run, shell: true, env: { ...agent.env } }
  const kindAgent = AgentKind.agent(ProcessKind.ProcessKind, agent.id, input, {
    timeout: agent.timeoutMs,
    retry: agent.retries > 0 ? Schedule.recurs(agent.retries) : undefined,
    claims: { read: agent.claims.read, write: agent.claims.write, pools: agent.claims.pools },
    claimTimeout: agent.claimTimeoutMs,
    dependsOn: agent.dependsOn,
    estimate: agent.estimateMs,
    rateLimit: agent.rateLimit,
    labels: agent.labels,
    ...(agent.labels.requires === undefined ? {} : { requires: agent.labels.requires })
  })
  const requires = agent.labels.requires === undefined ? {} : { requires: agent.labels.requires }
  const inWorktree = (deps: Agent.Deps, ws: ClusterWorkspaces.ClusterWorkspaces) =>
    Effect.gen(function* () {
      const workspace = yield* ws.prepare(agent)
      const output = yield* AgentKind.agent(ProcessKind.ProcessKind, agent.id, { ...input, workspace }, requires).run(
        deps
      )
      const merged = yield* ws.mergeBack(agent, workspace.base, output.commit)
      return {
        process: {
          exitCode: 0,
          durationMs: output.durationMs,
          tail: output.tail,
          usage: { cpuUserMs: 0, cpuSystemMs: 0, peakRssMb: 0 },
          droppedLines: 0
        },
        merge: merged.merge,
        commit: merged.commit
      } satisfies AgentResult
    })
  const run = (deps: Agent.Deps) =>
    workspaces !== undefined
      ? inWorktree(deps, workspaces)
      : Effect.map(
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
    retry:
      agent.retries > 0
        ? Schedule.recurs(agent.retries).pipe(Schedule.while((meta) => !(meta.input instanceof MergeConflict)))
        : undefined,
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
    const isolation = isolationOf(flags, plan)
    const target = isolation === "worktree" ? yield* workspaceTarget(flags) : undefined
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
    const mode = Reporter.modeFor(flags.json, process.stdout)
    const reporter = Reporter.make(mode, plan.agents)
    const emit = (event: RunEvent) =>
      Effect.andThen(
        Effect.sync(() => reporter.onEvent(event)),
        Effect.ignore(ledger.record(runId, event as RunLedger.LedgerEvent))
      )
    const workspaces =
      target === undefined
        ? undefined
        : yield* ClusterWorkspaces.make({ repo: target.repo, runId, plan, remote: target.remote, emit }).pipe(
            Effect.provide(Workspace.layer),
            Effect.catch((error) => invalidInput(`cannot start the run's integration branch: ${error.message}`))
          )
    const agents = plan.agents.map((agent) => toAgent(agent, workspaces))
    yield* ledger.startRun({
      runId,
      planFile: plan.file,
      planHash: plan.hash,
      options: {
        cluster: PostgresClient.redact(flags.cluster),
        isolation,
        lineage: runId,
        base: null,
        ...(target === undefined ? {} : { remote: target.remote })
      },
      pid: process.pid,
      hostname: NodeOs.hostname(),
      startedAt: Date.now(),
      agents: agents.map((agent) => ({ agentId: agent.id, dependsOn: agent.dependsOn }))
    })
    const stop = yield* Deferred.make<string>()
    yield* interruptions(stop, reporter)
    const result = yield* Corral.run(agents, {
      runId,
      concurrency: Option.getOrElse(flags.concurrency, () => plan.concurrency),
      mode: Option.getOrElse(flags.mode, () => plan.mode),
      pools: plan.pools,
      rateLimits: rateLimitsOf(plan),
      onEvent: (event) => emit(event as RunEvent),
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
      integrationBranch: workspaces?.integration.branch,
      integrationBase: workspaces?.integration.baseCommit,
      integrationHead: workspaces === undefined ? undefined : yield* workspaces.integration.head().pipe(Effect.orDie),
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
