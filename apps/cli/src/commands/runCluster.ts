/**
 * `corral run <plan> --cluster URL`: the plan is validated here and coordinated from this process;
 * each agent runs as a `corral/process` agent on a runner of the cluster. With `isolation: worktree`
 * (the default) it runs in a worktree on its runner, started from the run's integration head
 * published to a git remote, and its work is merged back here (`ClusterWorkspaces`); with
 * `isolation: none` it runs in its runner's `--repo`. Claims are taken in Postgres (`PostgresLocks`)
 * and the run is recorded in Postgres (`PostgresLedger`). The live view, `--json` events, summary
 * and exit codes are those of a local run.
 *
 * `--resume` (or `--resume-from ID`) continues a cluster run whose coordinator died: the coordinator
 * liveness in Postgres (`PostgresLiveness`) marks it crashed, successes recorded under the run's
 * lineage are reused (`Cached`), and each agent that had no outcome takes over its persisted
 * execution (`Cluster.ExecutorOptions.adopt`): the stored result if it finished meanwhile, else the
 * running execution is awaited (re-run only when its runner dies too: at-least-once, fenced). A
 * worktree run resumes in the repository it ran in, through the same remote: its integration branch
 * starts at the crashed run's integration branch, agents found merged there (`Reconcile`) are
 * recorded as successes first so they end `Cached`, and a taken-over execution's work is fetched
 * from the branch the crashed run's runner pushed.
 *
 * Not supported with `--cluster` yet (exit 2): directory isolation, worktrees with `merge: none`,
 * `--keep-workspaces`, coding agents (`use:`) and `prompt:`.
 *
 * A plan's `limits`, `sandbox`, `database:`, `passEnv`, `secrets` and `inheritEnv` travel in the
 * `corral/process` input and are applied by the runner; `passEnv`/`secrets` as names only (the
 * input is persisted in the cluster's database), their values read from the runner's environment.
 * With worktrees, an agent with `inputs` is cached under their hash at the run's base, as locally.
 * A resumed run's agents continue the attempts (and retry budget) of the executions they take over.
 *
 * @since 0.1.0
 */
import * as NodeOs from "node:os"
import { Cluster, ProcessKind, RunnerRegistry } from "@corral/cluster"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Agent from "@corral/core/Agent"
import * as AgentKind from "@corral/core/AgentKind"
import type * as Executor from "@corral/core/Executor"
import * as Corral from "@corral/core/Corral"
import { RunLedger, RunLiveness } from "@corral/platform-node"
import * as Git from "@corral/platform-node/Git"
import * as RemoteWorkspace from "@corral/platform-node/RemoteWorkspace"
import { Workspace } from "@corral/platform-node/Workspace"
import { PostgresClient, PostgresLedger, PostgresLiveness, PostgresLocks } from "@corral/postgres"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import * as CachedWork from "../CachedWork.ts"
import { invalidInput } from "../CliExit.ts"
import * as ClusterWorkspaces from "../ClusterWorkspaces.ts"
import * as Folder from "@corral/platform-node/Folder"
import * as Inputs from "../Inputs.ts"
import * as OutputGuard from "../OutputGuard.ts"
import { newRunId, resolve } from "../Paths.ts"
import { count } from "../Plural.ts"
import * as PlanFile from "../PlanFile.ts"
import * as Reconcile from "../Reconcile.ts"
import * as Report from "../Report.ts"
import * as Reporter from "../Reporter.ts"
import * as RequiredLabels from "../RequiredLabels.ts"
import * as RunnerWatch from "../RunnerWatch.ts"
import type { RunEvent } from "../RunEvent.ts"
import type { AgentResult } from "../RunPlan.ts"
import * as RunPlan from "../RunPlan.ts"
import { limitsOf, MergeConflict, rateLimitsOf } from "../RunPlan.ts"
import * as RunnerDrain from "../RunnerDrain.ts"
import type * as StopRequests from "../StopRequests.ts"
import * as Summary from "../Summary.ts"

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
  readonly stateDir: Option.Option<string>
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
  const coding = plan.agents.filter((agent) => agent.use !== undefined || agent.prompt !== undefined)
  if (coding.length > 0)
    return `${plan.file}: agents ${coding.map((agent) => agent.id).join(", ")} use a coding agent or a prompt, which --cluster does not send to runners yet; run them without --cluster`
  const overlaid = plan.agents.filter((agent) => agent.overlay)
  if (overlaid.length > 0)
    return `${plan.file}: agents ${overlaid.map((agent) => agent.id).join(", ")} ask for an overlay workspace, which --cluster runners do not set up; run them without --cluster or drop overlay`
  if (flags.keepWorkspaces)
    return "--keep-workspaces is not supported with --cluster (runners remove their worktrees; an agent's work is on its branch)"
  return undefined
}

/**
 * Where successes are cached: with worktrees as in a local run (an agent with `inputs` under the hash
 * of its inputs at the run's base commit, which is what its runner checks out, so any later run with
 * unchanged inputs reuses it and a changed input runs it again; others per lineage); with
 * `isolation: none` always per lineage (only a resumed run reuses them): the runners' checkouts are
 * not visible here.
 */
interface CacheScope {
  readonly lineage: string
  readonly inputsHash: Readonly<Record<string, string>> | undefined
}

const idempotencyKeyOf = (agent: PlanFile.PlanAgent, scope: CacheScope) =>
  scope.inputsHash === undefined
    ? `${agent.hash}:run:${scope.lineage}`
    : RunPlan.idempotencyKeyOf({ lineage: scope.lineage, runId: scope.lineage, inputsHash: scope.inputsHash }, agent)

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

/**
 * The remote of a worktree run: a resumed run keeps the crashed run's (its runners pushed there);
 * exit 2 when `--remote` names another.
 */
const remoteOf = (
  flags: ClusterFlags,
  target: { readonly repo: string; readonly remote: string } | undefined,
  recorded: string | undefined
) =>
  Effect.gen(function* () {
    if (target === undefined) return ""
    if (recorded === undefined || recorded === target.remote) return target.remote
    if (Option.isSome(flags.remote))
      return yield* invalidInput(
        `--remote ${target.remote}: the run being resumed used the remote ${recorded}; pass that one or leave --remote out`
      )
    yield* Git.run(["ls-remote", "--", recorded, "HEAD"], { cwd: target.repo }).pipe(
      Effect.catch((error) =>
        invalidInput(
          `the remote ${recorded} of the run being resumed is not a git repository corral can reach\n${"stderr" in error ? error.stderr : error.message}`
        )
      )
    )
    return recorded
  })

/**
 * What a runner needs to run the agent as a local run would: its command and environment, and its
 * limits, sandbox, database and the *names* of the variables it takes from the runner's environment
 * (`passEnv`, `secrets`): the input is persisted in the cluster's database, so no secret value is.
 */
const processInput = (agent: PlanFile.PlanAgent): ProcessKind.Input => ({
  command: agent.run,
  shell: true,
  env: { ...agent.env },
  limits: limitsOf(agent),
  ...(agent.sandbox === undefined ? {} : { sandbox: agent.sandbox }),
  ...(agent.passEnv.length === 0 ? {} : { passEnv: agent.passEnv }),
  ...(agent.secrets.length === 0 ? {} : { secrets: agent.secrets }),
  ...(agent.inheritEnv ? { inheritEnv: true } : {}),
  ...(agent.database === "per-agent" ? { database: "per-agent" as const } : {})
})

/**
 * The attempts of a resumed run's agents, counted over the runs it resumes: the attempt each agent's
 * first execution adopted (`Cluster.ExecutorOptions.onAdopt`), and the last attempt each one made.
 */
interface Attempts {
  readonly adopted: Map<string, number>
  readonly made: Map<string, number>
}

/**
 * Shows the warnings of the workspaces runners gave the run's agents (a port block private to its
 * runner's process, say) as a local run shows its own: a `Notice` each, once per run.
 */
const workspaceWarnings = (emit: (event: RunEvent) => Effect.Effect<void>) => {
  const warned = new Set<string>()
  return (warnings: ReadonlyArray<string> | undefined): Effect.Effect<void> =>
    Effect.forEach(
      (warnings ?? []).filter((warning) => !warned.has(warning)),
      (warning) => {
        warned.add(warning)
        return emit({ _tag: "Notice", at: Date.now(), message: `warning: ${warning}` })
      },
      { discard: true }
    )
}

const toAgent = (
  agent: PlanFile.PlanAgent,
  cache: CacheScope,
  workspaces: ClusterWorkspaces.ClusterWorkspaces | undefined,
  memoryPool: boolean,
  attempts: Attempts,
  warn: (warnings: ReadonlyArray<string> | undefined) => Effect.Effect<void>
) => {
  const input = processInput(agent)
  const pools = { ...agent.claims.pools }
  if (agent.limits.memoryMb !== undefined && memoryPool) pools.memoryMb = agent.limits.memoryMb
  const kindAgent = AgentKind.agent(ProcessKind.ProcessKind, agent.id, input, {
    timeout: agent.timeoutMs,
    retry: agent.retries > 0 ? Schedule.recurs(agent.retries) : undefined,
    claims: { read: agent.claims.read, write: agent.claims.write, pools },
    claimTimeout: agent.claimTimeoutMs,
    dependsOn: agent.dependsOn,
    estimate: agent.estimateMs,
    rateLimit: agent.rateLimit,
    labels: agent.labels,
    ...(agent.labels.requires === undefined ? {} : { requires: agent.labels.requires })
  })
  const requires = agent.labels.requires === undefined ? {} : { requires: agent.labels.requires }
  const warned = <R>(
    run: Effect.Effect<typeof ProcessKind.Output.Type, ProcessKind.CommandFailed | Executor.ExecutionError, R>
  ) =>
    run.pipe(
      Effect.tap((output) => warn(output.warnings)),
      Effect.tapError((error) => (error._tag === "CommandFailed" ? warn(error.warnings) : Effect.void))
    )
  const inWorktree = (deps: Agent.Deps, ws: ClusterWorkspaces.ClusterWorkspaces) =>
    Effect.gen(function* () {
      const workspace = yield* ws.prepare(agent)
      const output = yield* AgentKind.agent(ProcessKind.ProcessKind, agent.id, { ...input, workspace }, requires)
        .run(deps)
        .pipe(warned)
      const merged = yield* ws.mergeBack(agent, output.base ?? workspace.base, output.commit, output.runId)
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
  const execute = (deps: Agent.Deps) =>
    workspaces !== undefined
      ? inWorktree(deps, workspaces)
      : Effect.map(
          warned(kindAgent.run(deps)),
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
  const run = (deps: Agent.Deps) =>
    Effect.flatMap(Agent.current, (me) =>
      execute(deps).pipe(
        Effect.ensuring(
          Effect.sync(() => attempts.made.set(agent.id, (attempts.adopted.get(agent.id) ?? 1) - 1 + (me?.attempt ?? 1)))
        )
      )
    )
  return Agent.make(kindAgent.id, {
    run,
    timeout: kindAgent.timeout,
    retry:
      agent.retries > 0
        ? Schedule.recurs(agent.retries).pipe(
            Schedule.while(
              (meta) => !(meta.input instanceof MergeConflict) && (attempts.made.get(agent.id) ?? 0) < agent.retries + 1
            )
          )
        : undefined,
    claims: kindAgent.claims,
    claimTimeout: kindAgent.claimTimeout,
    dependsOn: kindAgent.dependsOn,
    estimate: kindAgent.estimate,
    rateLimit: kindAgent.rateLimit,
    inputs: kindAgent.inputs,
    idempotencyKey: idempotencyKeyOf(agent, cache),
    labels: kindAgent.labels
  })
}

const wasRunning = (agent: { readonly outcome: string | null; readonly detail: string }) =>
  agent.outcome === null ||
  (agent.outcome === "Interrupted" && (agent.detail === "crashed" || agent.detail === RunLedger.unrecordedEnd))

/** A run that ended without merging anything removed its integration branch (`dropIfEmpty`). */
const mergedNothing = (ledger: RunLedger.Service, runId: string) =>
  Effect.map(ledger.getRun(runId), (run) =>
    Option.match(run, {
      onNone: () => false,
      onSome: (record) =>
        record.endedAt !== null &&
        record.status !== "crashed" &&
        record.agents.every((agent) => agent.merge !== "merged")
    })
  )

/** The run a `--resume`/`--resume-from` continues: unfinished, and its coordinator gone. */
const resumeTarget = (
  flags: ClusterFlags,
  plan: PlanFile.Plan,
  ledger: RunLedger.Service,
  isolation: "worktree" | "directory" | "none",
  repo: string | undefined
) =>
  Effect.gen(function* () {
    if (!flags.resume && Option.isNone(flags.resumeFrom)) return undefined
    const previous = Option.isSome(flags.resumeFrom)
      ? (yield* ledger.listRuns()).find((run) => Option.contains(flags.resumeFrom, run.runId))
      : Option.getOrUndefined(yield* ledger.latestUnfinished(plan.hash))
    if (previous === undefined) {
      return yield* invalidInput(
        Option.isSome(flags.resumeFrom)
          ? `no recorded run ${flags.resumeFrom.value} in the cluster's ledger`
          : `no unfinished run of ${plan.file} in the cluster's ledger to resume`
      )
    }
    if (previous.status === "running")
      return yield* invalidInput(
        `run ${previous.runId} is still running: its coordinator (pid ${previous.pid} on ${previous.hostname}) is alive; stop it first or wait for it`
      )
    const options = previous.options as { lineage?: string; isolation?: string; remote?: string } | null
    const was = options?.isolation ?? "none"
    if (was !== isolation)
      return yield* invalidInput(
        `run ${previous.runId} ran with isolation ${was}; resume it with the same isolation (--isolation ${was})`
      )
    const lineage = options?.lineage ?? previous.runId
    if (repo === undefined) return { runId: previous.runId, lineage, base: undefined, remote: undefined }
    const base = `corral/${previous.runId}/integration`
    const exists = yield* Git.test(["rev-parse", "--verify", "--quiet", `refs/heads/${base}`], { cwd: repo }).pipe(
      Effect.orElseSucceed(() => false)
    )
    if (!exists && (yield* mergedNothing(ledger, previous.runId)))
      return { runId: previous.runId, lineage, base: undefined, remote: options?.remote }
    if (!exists)
      return yield* invalidInput(
        `run ${previous.runId} merged into its integration branch ${base}, which is not in ${repo}; resume it from the repository it ran in`
      )
    return { runId: previous.runId, lineage, base, remote: options?.remote }
  })

/**
 * For each agent of the plan, the runs of `lineage` (newest first) whose coordinator died while the
 * agent had no outcome, back to the last run that gave it one: where its persisted execution may be.
 */
const adoptable = (ledger: RunLedger.Service, plan: PlanFile.Plan, lineage: string) =>
  Effect.gen(function* () {
    const runs = (yield* ledger.listRuns()).filter(
      (run) => ((run.options as { lineage?: string } | null)?.lineage ?? run.runId) === lineage
    )
    const records = []
    for (const run of runs) {
      const record = yield* ledger.getRun(run.runId)
      if (Option.isSome(record)) records.push(record.value)
    }
    const adopt = new Map<string, Array<string>>()
    for (const agent of plan.agents) {
      const candidates: Array<string> = []
      for (const record of records) {
        const recorded = record.agents.find((known) => known.agentId === agent.id)
        if (recorded === undefined) continue
        if (!wasRunning(recorded)) break
        candidates.push(record.runId)
      }
      if (candidates.length > 0) adopt.set(agent.id, candidates)
    }
    return adopt
  })

const writeReport = (ledger: RunLedger.Service, flags: ClusterFlags, runId: string) =>
  Effect.gen(function* () {
    yield* ledger.flush
    const run = yield* ledger.getRun(runId)
    if (Option.isNone(run)) return undefined
    const { stateDir } = yield* resolve(flags.repo, flags.stateDir)
    const dir = NodePath.join(stateDir, "runs", runId)
    yield* Effect.orDie(Folder.make(dir))
    NodeFs.writeFileSync(NodePath.join(dir, "report.html"), Report.html(run.value))
    NodeFs.writeFileSync(NodePath.join(dir, "trace.json"), JSON.stringify(Report.trace(run.value)))
    return dir
  })

/**
 * Asks the cluster's database `SELECT 1` every 5 s (at most 5 s each) and tells the user when it
 * stops answering and when it answers again: meanwhile the run waits without an event of its own.
 */
const watchDatabase = (sql: SqlClient.SqlClient, note: (message: string) => void) => {
  let down = false
  const probe = Effect.match(sql`SELECT 1`.pipe(Effect.timeout("5 seconds")), {
    onFailure: (error) => {
      if (!down)
        note(
          `the cluster's database does not answer (${error.message}); the run waits for it (runners stop their agents and run them again once it is back; Ctrl-C stops the run)`
        )
      down = true
    },
    onSuccess: () => {
      if (down) note("the cluster's database answers again; the run continues")
      down = false
    }
  })
  return Effect.repeat(probe, Schedule.spaced("5 seconds"))
}

/** What a run whose end the cluster's database did not take (it was unreachable) tells the user. */
const notRecorded = (runId: string, reason: string) =>
  `corral: cannot record the end of run ${runId} in the cluster's database: ${reason}\n` +
  "  its ledger still says running, so `corral runs --cluster` shows it as crashed; the runners may still run\n" +
  "  its unfinished agents once the database is back; `corral run --resume --cluster` continues it\n"

/**
 * Waits until the runners ended the run's executions (`RunnerDrain`), at most `RunnerDrain.bound`
 * or until a second stop request; agents still running then are named on stderr and recorded in the
 * run's ledger (`RunnersStillRunning`).
 */
const drainRunners = (
  sql: SqlClient.SqlClient,
  ledger: RunLedger.RunLedger["Service"],
  requests: StopRequests.StopRequests,
  target: RunnerDrain.Target
) =>
  Effect.gen(function* () {
    const within = Duration.toSeconds(RunnerDrain.bound)
    const drained = yield* RunnerDrain.wait({
      running: RunnerDrain.running(sql, target),
      within: RunnerDrain.bound,
      every: "50 millis",
      skip: Deferred.await(requests.again),
      slowAfter: "1 second",
      slow: (agents) =>
        OutputGuard.write(
          process.stderr,
          `waiting for the runners to stop ${count(agents.length, "agent")} (${RunnerDrain.byRunner(agents)}); at most ${within} s, Ctrl-C again exits now\n`
        )
    })
    if (drained._tag === "Ended") return
    if (drained._tag === "Unknown") {
      OutputGuard.write(
        process.stderr,
        `corral: cannot see whether the runners stopped the agents of run ${target.runId}: ${drained.reason}\n`
      )
      return
    }
    if (drained.agents.length === 0) return
    const ids = drained.agents.map((running) => running.agent)
    const why = drained._tag === "Skipped" ? "not waiting (stopped again)" : `still running after ${within} s`
    OutputGuard.write(
      process.stderr,
      `corral: ${why}: agents ${ids.join(", ")} of run ${target.runId} may still be running${RunnerDrain.whereRunning(drained.agents)}\n`
    )
    yield* Effect.ignore(
      ledger.record(target.runId, {
        _tag: "RunnersStillRunning",
        at: Date.now(),
        agents: ids,
        running: drained.agents.map(({ agent, runner }) => ({ agent, runner: runner ?? null })),
        reason: drained._tag === "Skipped" ? "stopped again" : "bound"
      })
    )
  })

/**
 * Runs the plan on the cluster; returns the exit code. Ctrl-C stops the run as a local one.
 *
 * @since 0.1.0
 * @category running
 */
export const execute = (flags: ClusterFlags, requests: StopRequests.StopRequests) =>
  Effect.gen(function* () {
    const plan = yield* PlanFile.load(flags.plan).pipe(
      Effect.catchTag("PlanFileError", (error) => invalidInput(`invalid plan\n${error.message}`))
    )
    const problem = unsupported(flags, plan) ?? RequiredLabels.unplaceable(plan)
    if (problem !== undefined) return yield* invalidInput(problem)
    const isolation = isolationOf(flags, plan)
    const target = isolation === "worktree" ? yield* workspaceTarget(flags) : undefined
    const client = yield* Layer.build(PostgresClient.layer(flags.cluster, { maxConnections: 3 })).pipe(
      Effect.catchTag("PostgresUnavailable", (error) => invalidInput(error.message))
    )
    const required = [
      ...new Set(plan.agents.flatMap((agent) => (agent.labels.requires === undefined ? [] : [agent.labels.requires])))
    ]
    yield* RunnerRegistry.check(required).pipe(
      Effect.provideContext(client),
      Effect.catchTag("NoRunner", (error) => invalidInput(error.message)),
      Effect.catchTags({
        SqlError: (error) => invalidInput(PostgresClient.withServerAnswer(error)),
        MigrationError: (error) => invalidInput(PostgresClient.withServerAnswer(error))
      })
    )
    const ledger = yield* Layer.build(PostgresLedger.layer(flags.cluster)).pipe(
      Effect.map((context) => Context.get(context, RunLedger.RunLedger))
    )
    const liveness = yield* PostgresLiveness.make().pipe(Effect.provideContext(client))
    yield* RunLiveness.markCrashed.pipe(
      Effect.provideService(RunLedger.RunLedger, ledger),
      Effect.provideService(RunLiveness.RunLiveness, liveness)
    )
    const resumed = yield* resumeTarget(flags, plan, ledger, isolation, target?.repo)
    const remote = yield* remoteOf(flags, target, resumed?.remote)
    const runId = newRunId()
    const lineage = resumed?.lineage ?? runId
    yield* liveness
      .hold({ runId, lineage })
      .pipe(Effect.catchTag("LineageBusy", (error) => invalidInput(error.message)))
    const adopt = resumed === undefined ? new Map<string, Array<string>>() : yield* adoptable(ledger, plan, lineage)
    const cache: CacheScope = {
      lineage,
      inputsHash:
        target === undefined
          ? undefined
          : yield* Inputs.hashes(target.repo, resumed?.base ?? "HEAD", plan).pipe(Effect.orElseSucceed(() => ({})))
    }
    const reconciled =
      target === undefined || resumed?.base === undefined
        ? []
        : yield* Reconcile.reconcile({
            ledger,
            repo: target.repo,
            plan,
            base: resumed.base,
            lineage,
            runId,
            inputsHash: cache.inputsHash ?? {},
            keyOf: (agent) => idempotencyKeyOf(agent, cache)
          }).pipe(
            Effect.catch((error) =>
              invalidInput(
                `cannot read what run ${resumed.runId} already merged (${resumed.base}), not resuming: ${error.message}`
              )
            )
          )
    const mode = Reporter.modeFor(flags.json, process.stdout)
    const reporter = Reporter.make(mode, plan.agents)
    const runnerWatch = RunnerWatch.make(
      new Map(plan.agents.map((agent) => [agent.id, agent.labels.requires])),
      `corral runner --cluster ${PostgresClient.redact(flags.cluster)}`,
      reporter.note
    )
    const emit = (event: RunEvent) =>
      Effect.andThen(
        Effect.sync(() => {
          runnerWatch.onEvent(event)
          reporter.onEvent(event)
        }),
        Effect.ignore(ledger.record(runId, event as RunLedger.LedgerEvent))
      )
    const workspaces =
      target === undefined
        ? undefined
        : yield* ClusterWorkspaces.make({ repo: target.repo, runId, plan, remote, base: resumed?.base, emit }).pipe(
            Effect.provide(Workspace.layer),
            Effect.catch((error) => invalidInput(`cannot start the run's integration branch: ${error.message}`))
          )
    // A run that fails after this point (the ledger refusing its start, the database going away)
    // drops the branch as its end does when nothing was merged; a crash keeps it for `--resume`.
    // A resumed run's branch (from the old run's integration head) holds the lineage's work: kept.
    const droppable = resumed?.base === undefined ? workspaces : undefined
    if (droppable !== undefined) yield* Effect.addFinalizer(RunPlan.dropOnFailure(droppable.integration))
    const attempts: Attempts = { adopted: new Map(), made: new Map() }
    const warn = workspaceWarnings(emit)
    const agents = plan.agents.map((agent) =>
      toAgent(agent, cache, workspaces, plan.pools.memoryMb !== undefined, attempts, warn)
    )
    yield* ledger.startRun({
      runId,
      planFile: NodePath.resolve(plan.file),
      planHash: plan.hash,
      options: {
        cluster: PostgresClient.redact(flags.cluster),
        isolation,
        lineage,
        resumes: resumed?.runId ?? null,
        base: resumed?.base ?? null,
        ...(target === undefined ? {} : { remote })
      },
      pid: process.pid,
      hostname: NodeOs.hostname(),
      startedAt: Date.now(),
      agents: agents.map((agent) => ({
        agentId: agent.id,
        dependsOn: agent.dependsOn,
        idempotencyKey: agent.idempotencyKey ?? null
      }))
    })
    yield* Effect.forkScoped(Effect.repeat(Effect.ignore(ledger.heartbeat(runId)), Schedule.spaced("5 seconds")))
    yield* Effect.forkScoped(watchDatabase(Context.get(client, SqlClient.SqlClient), reporter.note))
    yield* Effect.forkScoped(Effect.provideContext(runnerWatch.run, client))
    if (resumed !== undefined) {
      reporter.note(
        `resuming run ${resumed.runId}: recorded successes are reused; ${count(adopt.size, "agent")} without an outcome ${adopt.size === 1 ? "takes over its" : "take over their"} execution on the runners where one was started`
      )
    }
    for (const done of reconciled) {
      reporter.note(
        `${done.agentId}: merged by run ${done.runId} (${done.commit.slice(0, 10)}) before it stopped; not run again`
      )
    }
    requests.attach(reporter)
    const result = yield* Corral.run(agents, {
      runId,
      concurrency: Option.getOrElse(flags.concurrency, () => plan.concurrency),
      mode: Option.getOrElse(flags.mode, () => plan.mode),
      pools: plan.pools,
      rateLimits: rateLimitsOf(plan),
      onEvent: (event) => emit(event as RunEvent),
      stopOn: Deferred.await(requests.stop)
    }).pipe(
      Effect.provide(
        Cluster.layerExecutor({
          url: flags.cluster,
          adopt,
          onAdopt: (agentId, attempt) => attempts.adopted.set(agentId, attempt)
        })
      ),
      Effect.provide(PostgresLocks.layer(flags.cluster)),
      Effect.provide(
        CachedWork.layer(
          target?.repo ?? ".",
          workspaces?.integration.baseCommit,
          agents.flatMap((agent) => (agent.idempotencyKey === undefined ? [] : [agent.idempotencyKey]))
        )
      ),
      Effect.provideService(RunLedger.RunLedger, ledger),
      Effect.ensuring(Effect.sync(reporter.close)),
      Effect.catchTag("InvalidRun", (error) => invalidInput(error.message))
    )
    if (result.stopped !== undefined || !result.allSucceeded) {
      yield* drainRunners(Context.get(client, SqlClient.SqlClient), ledger, requests, {
        runId,
        agents: plan.agents.map((agent) => ({ id: agent.id, requires: agent.labels.requires })),
        adopted: adopt
      })
    }
    if (droppable !== undefined) yield* droppable.integration.dropIfEmpty().pipe(Effect.orElseSucceed(() => false))
    const report = {
      runId,
      result,
      integrationBranch: workspaces?.integration.branch,
      integrationBase: workspaces?.integration.baseCommit,
      integrationHead: workspaces === undefined ? undefined : yield* workspaces.integration.head().pipe(Effect.orDie),
      integrationFrom: workspaces === undefined ? undefined : resumed?.base,
      logDir: `in the cluster's database: corral logs ${runId} <agent> --cluster <url>`,
      keptWorkspaces: [],
      git: {},
      phases: {}
    }
    const unrecorded = yield* ledger
      .finishRun(
        runId,
        result.stopped?._tag === "Stopped" ? "interrupted" : result.allSucceeded ? "succeeded" : "failed",
        result.endedAt
      )
      .pipe(
        Effect.as(undefined),
        Effect.catchTag("RunLedgerError", (error) => Effect.succeed(error.message))
      )
    if (unrecorded === undefined && target !== undefined && resumed !== undefined && result.allSucceeded) {
      for (const crashed of new Set([resumed.runId, ...[...adopt.values()].flat()]))
        yield* RemoteWorkspace.clean(target.repo, remote, crashed)
    }
    const reportDir = flags.report && unrecorded === undefined ? yield* writeReport(ledger, flags, runId) : undefined
    const rendered = Summary.render(report, { color: mode === "tty", columns: process.stdout.columns })
    const summary =
      reportDir === undefined
        ? rendered
        : `${rendered}\nreport: ${NodePath.join(reportDir, "report.html")} (and trace.json)`
    if (mode === "json") process.stderr.write(`${summary}\n`)
    else process.stdout.write(`\n${summary}\n`)
    const stopped = report.result.stopped === undefined ? undefined : requests.exitCode()
    if (unrecorded === undefined) return stopped ?? Summary.exitCode(report)
    OutputGuard.write(process.stderr, notRecorded(runId, unrecorded))
    return stopped ?? Math.max(Summary.exitCode(report), 1)
  }).pipe(Effect.scoped)
