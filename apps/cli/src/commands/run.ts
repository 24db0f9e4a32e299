import * as Git from "@corral/platform-node/Git"
import * as RunLedger from "@corral/platform-node/RunLedger"
import * as RunLiveness from "@corral/platform-node/RunLiveness"
import * as SqliteLocks from "@corral/platform-node/SqliteLocks"
import type { RunStatus } from "@corral/platform-node/RunRecord"
import * as Config from "effect/Config"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import { CliExit, invalidInput } from "../CliExit.ts"
import * as Inputs from "../Inputs.ts"
import * as LedgerFile from "../LedgerFile.ts"
import * as Orphans from "../Orphans.ts"
import * as OutputGuard from "../OutputGuard.ts"
import { checkWorkTree, makeStateDir, newRunId, notARepository, resolve } from "../Paths.ts"
import type * as PlanFile from "../PlanFile.ts"
import * as Reconcile from "../Reconcile.ts"
import * as Reporter from "../Reporter.ts"
import * as RunPlan from "../RunPlan.ts"
import * as KillPoint from "../internal/killPoint.ts"
import * as StopRequests from "../StopRequests.ts"
import * as Summary from "../Summary.ts"
import * as Telemetry from "../Telemetry.ts"
import { loadChecked } from "./validate.ts"

const flags = {
  plan: Argument.String("plan").pipe(Argument.withDescription("The plan file (YAML or JSON)")),
  concurrency: Flag.Int("concurrency").pipe(
    Flag.optional,
    Flag.withDescription("Most agents running at once (overrides the plan)")
  ),
  mode: Flag.Literals("mode", ["settle", "fail-fast"]).pipe(
    Flag.optional,
    Flag.withDescription("settle: run everything; fail-fast: stop at the first failure")
  ),
  isolation: Flag.Literals("isolation", ["worktree", "directory", "none"]).pipe(
    Flag.optional,
    Flag.withDescription("Where each agent runs")
  ),
  json: Flag.Boolean("json").pipe(Flag.withDefault(false), Flag.withDescription("Print newline-delimited JSON events")),
  keepWorkspaces: Flag.Boolean("keep-workspaces").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Keep every workspace for inspection")
  ),
  repo: Flag.String("repo").pipe(
    Flag.optional,
    Flag.withDescription("The target repository (default: current directory)")
  ),
  stateDir: Flag.String("state-dir").pipe(
    Flag.optional,
    Flag.withDescription(
      "Where corral keeps its state (default: $CORRAL_HOME, else .corral at the top of the repository holding --repo)"
    )
  ),
  resume: Flag.Boolean("resume").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Resume the latest unfinished run of this plan: recorded successes are not run again")
  ),
  resumeFrom: Flag.String("resume-from").pipe(Flag.optional, Flag.withDescription("Resume the run with this id")),
  verbose: Flag.Boolean("verbose").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Also print, per agent, the git commands it cost (count and process time) and the wall time of its set-up, command, commit and merge"
    )
  ),
  report: Flag.Boolean("report").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Write report.html and trace.json")
  ),
  cluster: Flag.String("cluster").pipe(
    Flag.withFallbackConfig(Config.String("CORRAL_CLUSTER")),
    Flag.optional,
    Flag.withDescription("Run the agents on the runners of this cluster (Postgres URL; default: $CORRAL_CLUSTER)")
  ),
  remote: Flag.String("remote").pipe(
    Flag.optional,
    Flag.withDescription(
      "With --cluster and worktree isolation: the git remote (path or URL) runners fetch bases from and push agents' work to (default: a bare repository in the repository's .git/corral/, for runners on this machine)"
    )
  ),
  otlpEndpoint: Flag.String("otlp-endpoint").pipe(
    Flag.optional,
    Flag.withDescription(
      "Send traces to this OTLP/HTTP collector (default: $OTEL_EXPORTER_OTLP_ENDPOINT; off when unset)"
    )
  )
}

type Flags = {
  readonly plan: string
  readonly concurrency: Option.Option<number>
  readonly mode: Option.Option<"settle" | "fail-fast">
  readonly isolation: Option.Option<"worktree" | "directory" | "none">
  readonly json: boolean
  readonly keepWorkspaces: boolean
  readonly repo: Option.Option<string>
  readonly stateDir: Option.Option<string>
  readonly resume: boolean
  readonly resumeFrom: Option.Option<string>
  readonly report: boolean
  readonly cluster: Option.Option<string>
  readonly remote: Option.Option<string>
  readonly verbose: boolean
  readonly otlpEndpoint: Option.Option<string>
}

const loadPlan = (file: string) => Effect.map(loadChecked(file), ({ plan }) => plan)

const resumeTarget = (flags: Flags, plan: PlanFile.Plan, repo: string) =>
  Effect.gen(function* () {
    if (!flags.resume && Option.isNone(flags.resumeFrom)) return undefined
    const ledger = yield* RunLedger.RunLedger
    const previous = Option.isSome(flags.resumeFrom)
      ? (yield* ledger.listRuns()).find((run) => Option.contains(flags.resumeFrom, run.runId))
      : Option.getOrUndefined(yield* ledger.latestUnfinished(plan.hash))
    if (previous === undefined) {
      return yield* invalidInput(
        Option.isSome(flags.resumeFrom)
          ? `no recorded run ${flags.resumeFrom.value}`
          : `no unfinished run of ${plan.file} to resume`
      )
    }
    if (previous.status === "discarded") {
      return yield* invalidInput(
        `run ${previous.runId} was discarded: its branches, and with them the work of its recorded successes, are gone, so it cannot be resumed; start a new run`
      )
    }
    if (previous.status === "running") {
      return yield* invalidInput(
        `run ${previous.runId} is still running (pid ${previous.pid} on ${previous.hostname}): a second coordinator would run its agents twice; stop it first or let it end, then resume it`
      )
    }
    const lineage = (previous.options as { lineage?: string } | null)?.lineage ?? previous.runId
    const branch = `corral/${previous.runId}/integration`
    const exists = yield* Git.test(["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`], { cwd: repo }).pipe(
      Effect.orElseSucceed(() => false)
    )
    return { runId: previous.runId, lineage, base: exists ? branch : undefined }
  })

/** A secret the plan names but corral's environment lacks: the agent would run without it, silently. */
const unsetSecrets = (plan: PlanFile.Plan) =>
  plan.agents.flatMap((agent) =>
    agent.secrets
      .filter((name) => process.env[name] === undefined)
      .map(
        (name) =>
          `warning: agent ${agent.id}: secret ${name} is not set in corral's environment; the agent runs without it`
      )
  )

const statusOf = (report: RunPlan.Report): RunStatus =>
  report.result.stopped?._tag === "Stopped" ? "interrupted" : report.result.allSucceeded ? "succeeded" : "failed"

const writeReport = (stateDir: string, runId: string) =>
  Effect.gen(function* () {
    const ledger = yield* RunLedger.RunLedger
    yield* ledger.flush
    const run = yield* ledger.getRun(runId)
    if (Option.isNone(run)) return undefined
    const Report = yield* Effect.promise(() => import("../Report.ts"))
    const dir = NodePath.join(stateDir, "runs", runId)
    NodeFs.mkdirSync(dir, { recursive: true })
    NodeFs.writeFileSync(NodePath.join(dir, "report.html"), Report.html(run.value))
    NodeFs.writeFileSync(NodePath.join(dir, "trace.json"), JSON.stringify(Report.trace(run.value)))
    return dir
  })

const gitLines = (report: RunPlan.Report) => {
  const rows = Object.entries(report.git)
  const total = rows.reduce((sum, [, t]) => ({ commands: sum.commands + t.commands, millis: sum.millis + t.millis }), {
    commands: 0,
    millis: 0
  })
  const width = Math.max(5, ...rows.map(([id]) => id.length))
  const ms = (value: number | undefined) => (value === undefined ? "" : `${Math.round(value)} ms`).padStart(8)
  const phases = (id: string) => {
    const p = report.phases[id]
    return p === undefined
      ? ""
      : `   set-up ${ms(p.setUpMs)}  command ${ms(p.commandMs)}  commit ${ms(p.commitMs)}  merge ${ms(p.mergeMs)}  slot ${ms(p.slotMs)}`
  }
  const line = (id: string, t: { commands: number; millis: number }) =>
    `  ${id.padEnd(width)}  ${String(t.commands).padStart(4)} ${t.commands === 1 ? "command " : "commands"}  ${Math.round(t.millis).toString().padStart(6)} ms${phases(id)}`
  return [
    "git per agent (and the run's own), and the wall time of each agent's phases:",
    ...rows.map(([id, t]) => line(id, t)),
    line("total", total)
  ].join("\n")
}

/** Resuming without knowing what the integration branch holds could apply work twice: refuse. */
const reconcileFailed = (message: string) =>
  Effect.andThen(
    Effect.sync(() =>
      process.stderr.write(`corral: cannot read what the resumed run already merged, not resuming: ${message}\n`)
    ),
    Effect.fail(new CliExit({ code: 1 }))
  )

const storeFailed = (what: string, message: string) =>
  Effect.andThen(
    Effect.sync(() => OutputGuard.write(process.stderr, `corral: the ${what} failed: ${message}\n`)),
    Effect.succeed(1)
  )

/** `--cluster`: the cluster modules are loaded only for cluster runs. */
const executeOnCluster = (flags: Flags, cluster: string, requests: StopRequests.StopRequests) =>
  Effect.flatMap(
    Effect.promise(() => import("./runCluster.ts")),
    (module) => module.execute({ ...flags, cluster }, requests)
  )

/** A `locks.db` that is not a database is bad input, like a damaged ledger: nothing has started yet. */
const claimTableFailed = (file: string, message: string) => {
  const reason = LedgerFile.damageOf(message)
  return reason === undefined
    ? storeFailed("claim table", message)
    : invalidInput(
        LedgerFile.damaged("the claim table", file, reason, "a new one once no corral uses this state folder")
      )
}

const execute = (flags: Flags, requests: StopRequests.StopRequests) =>
  Effect.gen(function* () {
    if (Option.isSome(flags.concurrency) && flags.concurrency.value < 1) {
      return yield* invalidInput(`--concurrency must be at least 1, got ${flags.concurrency.value}`)
    }
    if (Option.isSome(flags.cluster) && flags.cluster.value !== "")
      return yield* executeOnCluster(flags, flags.cluster.value, requests)
    if (Option.isSome(flags.remote)) return yield* invalidInput("--remote is used only with --cluster")
    const paths = yield* resolve(flags.repo, flags.stateDir)
    const plan = yield* loadPlan(flags.plan)
    if (Option.getOrElse(flags.isolation, () => plan.isolation) === "worktree") yield* checkWorkTree(paths.repo)
    yield* makeStateDir(paths.stateDir)
    return yield* recorded(flags, paths, plan, requests).pipe(
      // A run writes a few batches per agent: committing them here costs less than a writer thread's start.
      Effect.provide(RunLedger.layerSqlite(NodePath.join(paths.stateDir, "ledger.db"), { writerThread: false })),
      Effect.provide(
        SqliteLocks.layer(NodePath.join(paths.stateDir, "locks.db"), {
          // The bound `Corral.run` applies within the run (its default), applied between processes too.
          maxBypass: Math.max(32, 4 * Option.getOrElse(flags.concurrency, () => plan.concurrency))
        })
      ),
      Effect.catchTags({
        SqlError: (error) => claimTableFailed(NodePath.join(paths.stateDir, "locks.db"), error.message),
        MigrationError: (error) => claimTableFailed(NodePath.join(paths.stateDir, "locks.db"), error.message)
      }),
      Effect.catchTag("RunLedgerError", (error) =>
        LedgerFile.isDamaged(error)
          ? invalidInput(LedgerFile.unreadable(NodePath.join(paths.stateDir, "ledger.db"), error))
          : Effect.andThen(
              Effect.sync(() => OutputGuard.write(process.stderr, `corral: the run ledger failed: ${error.message}\n`)),
              Effect.succeed(1)
            )
      )
    )
  })

const recorded = (
  flags: Flags,
  paths: { readonly repo: string; readonly stateDir: string },
  plan: PlanFile.Plan,
  requests: StopRequests.StopRequests
) =>
  Effect.gen(function* () {
    const ledger = yield* RunLedger.RunLedger
    const alive = yield* RunLiveness.leaseRule(paths.repo)
    const crashed = yield* ledger.markCrashed((pid, hostname, runId) => alive({ runId, pid, hostname }))
    yield* Orphans.reap(paths.stateDir, crashed)
    const resumed = yield* resumeTarget(flags, plan, paths.repo)
    const runId = newRunId()
    const inputsHash = plan.agents.some((agent) => agent.inputs.length > 0)
      ? yield* Inputs.hashes(paths.repo, resumed?.base ?? "HEAD", plan).pipe(Effect.orElseSucceed(() => ({})))
      : {}
    const reconciled =
      resumed?.base === undefined
        ? []
        : yield* Reconcile.reconcile({
            ledger,
            repo: paths.repo,
            plan,
            base: resumed.base,
            lineage: resumed.lineage,
            runId,
            inputsHash
          }).pipe(
            Effect.catchTags({
              GitError: (error) => reconcileFailed(`cannot read ${resumed.base}: ${error.message}`),
              GitNotFound: (error) => reconcileFailed(error.message),
              DiskFull: (error) => reconcileFailed(error.message)
            })
          )
    const mode = Reporter.modeFor(flags.json, process.stdout)
    const reporter = Reporter.make(mode, plan.agents)
    if (resumed !== undefined) reporter.note(`resuming run ${resumed.runId}: recorded successes are reused`)
    for (const done of reconciled) {
      reporter.note(
        `${done.agentId}: merged by run ${done.runId} (${done.commit.slice(0, 10)}) before it stopped; not run again`
      )
    }
    requests.attach(reporter)
    for (const warning of unsetSecrets(plan)) reporter.note(warning)
    yield* Effect.forkScoped(Effect.repeat(Effect.ignore(ledger.heartbeat(runId)), Schedule.spaced("5 seconds")))
    const report = yield* RunPlan.run({
      plan,
      ...paths,
      runId,
      concurrency: Option.getOrUndefined(flags.concurrency),
      mode: Option.getOrUndefined(flags.mode),
      isolation: Option.getOrUndefined(flags.isolation),
      keepWorkspaces: flags.keepWorkspaces,
      onEvent: reporter.onEvent,
      stopOn: Deferred.await(requests.stop),
      ledger,
      lineage: resumed?.lineage,
      base: resumed?.base,
      inputsHash
    }).pipe(
      Effect.provide(
        Telemetry.layerChecked(
          Telemetry.endpointFrom(flags.otlpEndpoint, process.env),
          { serviceName: "corral", runId },
          { onExportError: (message) => reporter.note(`warning: ${message}`) }
        )
      ),
      Effect.ensuring(Effect.sync(reporter.close)),
      Effect.catchTags({
        InvalidRun: (error) => invalidInput(error.message),
        NotAGitRepository: (error) => invalidInput(notARepository(error.path)),
        GitNotFound: (error) => invalidInput(error.message)
      })
    )
    // A ledger that fails only now still gets the summary: the agents' work is merged, and it says how to take it.
    const finished = yield* Effect.result(ledger.finishRun(runId, statusOf(report), report.result.endedAt))
    yield* KillPoint.waitAt("finished", "run")
    const summary = Summary.render(report, { color: mode === "tty", columns: process.stdout.columns })
    const reportDir = flags.report && Result.isSuccess(finished) ? yield* writeReport(paths.stateDir, runId) : undefined
    const withReport =
      reportDir === undefined
        ? summary
        : `${summary}\nreport: ${NodePath.join(reportDir, "report.html")} (and trace.json)`
    const text = flags.verbose
      ? `${withReport}
${gitLines(report)}`
      : withReport
    if (mode === "json")
      OutputGuard.write(
        process.stderr,
        `${text}
`
      )
    else
      OutputGuard.write(
        process.stdout,
        `
${text}
`
      )
    if (Result.isFailure(finished)) return yield* Effect.fail(finished.failure)
    const stopped = report.result.stopped === undefined ? undefined : requests.exitCode()
    return stopped ?? (OutputGuard.isClosed() ? OutputGuard.exitCode : Summary.exitCode(report))
  }).pipe(Effect.scoped)

/**
 * `corral run <plan>`.
 *
 * @since 0.1.0
 */
export const run = Command.make("run", flags, (flags) =>
  Effect.gen(function* () {
    const requests = yield* StopRequests.make
    const fiber = yield* Effect.forkDetach(execute(flags, requests))
    const code = yield* Fiber.join(fiber).pipe(Effect.onInterrupt(() => Fiber.await(fiber)))
    if (code !== 0) return yield* new CliExit({ code })
  }).pipe(Effect.scoped, Effect.tap(KillPoint.waitAt("exiting", "run")))
).pipe(
  Command.withDescription("Run the agents of a plan, each in its own workspace, and merge their work"),
  Command.withExamples([
    { command: "corral run plan.yaml", description: "run a plan in the current repository" },
    {
      command: "corral run plan.yaml --concurrency 2 --mode fail-fast",
      description: "at most 2 agents, stop at the first failure"
    },
    { command: "corral run plan.yaml --json > events.ndjson", description: "machine-readable events" }
  ])
)
