import * as RunLedger from "@corral/platform-node/RunLedger"
import * as RunLiveness from "@corral/platform-node/RunLiveness"
import type * as AgentOutput from "@corral/cluster/AgentOutput"
import type { RunRecord } from "@corral/platform-node/RunRecord"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { type CliExit, invalidInput } from "../CliExit.ts"
import * as Folder from "@corral/platform-node/Folder"
import * as AttemptLogs from "../AttemptLogs.ts"
import * as LogFollow from "../internal/logFollow.ts"
import * as LedgerFile from "../LedgerFile.ts"
import * as OutcomeText from "../OutcomeText.ts"
import * as OutputGuard from "../OutputGuard.ts"
import { resolve } from "../Paths.ts"
import * as Report from "../Report.ts"
import * as StatusView from "../StatusView.ts"

const location = {
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
  cluster: Flag.String("cluster").pipe(
    Flag.withFallbackConfig(Config.String("CORRAL_CLUSTER")),
    Flag.optional,
    Flag.withDescription("Read the runs of this cluster (Postgres URL; default: $CORRAL_CLUSTER)")
  )
}

type Location = {
  readonly repo: Option.Option<string>
  readonly stateDir: Option.Option<string>
  readonly cluster: Option.Option<string>
}

const clusterUrl = (flags: Location): string | undefined =>
  Option.isSome(flags.cluster) && flags.cluster.value !== "" ? flags.cluster.value : undefined

/** What the history commands read: the ledger, and who tells a crashed coordinator from a live one. */
interface Stores {
  readonly ledger: RunLedger.Service
  readonly liveness: RunLiveness.Service
  /** The agents' output stored by the cluster's runners (`AgentOutput`); `undefined` for local runs. */
  readonly output: OutputReader | undefined
}

type OutputReader = (
  runIds: ReadonlyArray<string>,
  agentId: string,
  after: number
) => Effect.Effect<ReadonlyArray<AgentOutput.Stored>, CliExit>

/** The cluster's ledger and coordinator liveness in Postgres; the driver is loaded only here. */
const clusterStores = (url: string) =>
  Effect.gen(function* () {
    const { PostgresClient, PostgresLiveness } = yield* Effect.promise(() => import("@corral/postgres"))
    const Output = yield* Effect.promise(() => import("@corral/cluster/AgentOutput"))
    const client = yield* Layer.build(PostgresClient.layer(url, { maxConnections: 2 })).pipe(
      Effect.catchTag("PostgresUnavailable", (error) => invalidInput(error.message))
    )
    const context = yield* Layer.build(Layer.merge(RunLedger.layerSql(), PostgresLiveness.layerClient())).pipe(
      Effect.provideContext(client)
    )
    return {
      ledger: Context.get(context, RunLedger.RunLedger),
      liveness: Context.get(context, RunLiveness.RunLiveness),
      output: (runIds, agentId, after) =>
        Output.read(runIds, agentId, after).pipe(
          Effect.provideContext(client),
          Effect.catch((error) => invalidInput(`cannot read the agents' output: ${error.message}`))
        )
    } satisfies Stores
  })

const withLedger = <A>(
  flags: Location,
  f: (stores: Stores, stateDir: string) => Effect.Effect<A, CliExit | RunLedger.RunLedgerError>
) =>
  Effect.gen(function* () {
    const url = clusterUrl(flags)
    if (url !== undefined) {
      const paths = yield* resolve(flags.repo, flags.stateDir)
      return yield* Effect.scoped(Effect.flatMap(clusterStores(url), (stores) => f(stores, paths.stateDir))).pipe(
        Effect.catchTag("RunLedgerError", (error: RunLedger.RunLedgerError) =>
          invalidInput(`cannot read the run ledger: ${error.message}`)
        )
      )
    }
    const paths = yield* resolve(flags.repo, flags.stateDir)
    const file = NodePath.join(paths.stateDir, "ledger.db")
    if (!NodeFs.existsSync(file)) return yield* invalidInput(`no runs recorded in ${paths.stateDir}`)
    const use = Effect.gen(function* () {
      const ledger = yield* RunLedger.RunLedger
      return yield* f({ ledger, liveness: yield* RunLiveness.RunLiveness, output: undefined }, paths.stateDir)
    })
    return yield* use.pipe(
      Effect.provide(Layer.merge(RunLedger.layerSqlite(file), RunLiveness.layerLease(paths.repo))),
      Effect.catchTag("RunLedgerError", (error: RunLedger.RunLedgerError) =>
        invalidInput(LedgerFile.unreadable(file, error))
      )
    )
  })

/** `run` as its coordinator's liveness shows it: a `running` run whose coordinator is gone crashed. */
const withLiveness = (liveness: RunLiveness.Service, run: RunRecord) =>
  run.status !== "running"
    ? Effect.succeed(run)
    : Effect.map(
        liveness.alive([run]),
        (alive): RunRecord =>
          alive.has(run.runId)
            ? run
            : { ...run, status: "crashed", stopReason: `coordinator pid ${run.pid} on ${run.hostname} is gone` }
      )

const recentRuns = (runs: ReadonlyArray<{ readonly runId: string }>) =>
  runs.length === 0
    ? "no runs are recorded"
    : `${runs.length === 1 ? "recent run" : "recent runs"}: ${runs
        .slice(0, 3)
        .map((run) => run.runId)
        .join(", ")} (corral runs lists ${runs.length === 1 ? "it" : "them all"})`

const findRun = (ledger: RunLedger.Service, runId: Option.Option<string>) =>
  Effect.gen(function* () {
    const runs = yield* ledger.listRuns()
    const id = Option.isSome(runId) ? runId.value : runs[0]?.runId
    if (id === undefined) return yield* invalidInput("no runs recorded yet")
    const run = runs.some((known) => known.runId === id) ? yield* ledger.getRun(id) : Option.none()
    if (Option.isNone(run)) return yield* invalidInput(`no such run ${JSON.stringify(id)}; ${recentRuns(runs)}`)
    return run.value
  })

const print = (text: string) => Effect.sync(() => OutputGuard.write(process.stdout, `${text}\n`))

const time = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19)
const duration = (from: number | null, to: number | null) =>
  from === null || to === null ? "-" : `${((to - from) / 1000).toFixed(1)}s`

/**
 * A run's duration for `corral runs`; a crashed run's is `≥` its last sign of life (the ledger's
 * last heartbeat, every 5 s, or the end it recorded when marked crashed): it ran at least that long.
 */
const runDuration = (run: RunLedger.RunSummary, status: RunLedger.RunSummary["status"]) =>
  status === "crashed"
    ? `≥${duration(run.startedAt, run.endedAt ?? Math.max(run.heartbeatAt, run.startedAt))}`
    : duration(run.startedAt, run.endedAt)

/**
 * `corral runs`.
 *
 * @since 0.1.0
 */
export const runs = Command.make("runs", location, (flags) =>
  withLedger(flags, ({ ledger, liveness }) =>
    Effect.gen(function* () {
      const all = yield* ledger.listRuns()
      const alive = yield* liveness.alive(all.filter((run) => run.status === "running"))
      for (const run of all) {
        const status = RunLiveness.statusOf(run, alive)
        yield* print(
          `${run.runId}  ${status.padEnd(11)} ${time(run.startedAt)}  ${runDuration(run, status).padStart(7)}  ${run.succeeded}/${run.total} succeeded  ${run.planFile}`
        )
      }
    })
  )
).pipe(
  Command.withDescription("List recorded runs, newest first"),
  Command.withExamples([
    {
      command: "corral runs",
      description: "the runs of this repository: id, status, start, duration (≥ for a crashed run), outcomes, plan"
    },
    { command: "corral runs --cluster postgres://corral@db:5432/corral", description: "the runs of a cluster" }
  ])
)

/**
 * `corral status [RUN_ID]`.
 *
 * @since 0.1.0
 */
export const status = Command.make(
  "status",
  { ...location, runId: Argument.String("run-id").pipe(Argument.optional) },
  (flags) =>
    withLedger(flags, ({ ledger, liveness, output }, stateDir) =>
      Effect.flatMap(findRun(ledger, flags.runId), (run) =>
        Effect.flatMap(withLiveness(liveness, run), (shown) =>
          print(
            StatusView.render(
              shown,
              Date.now(),
              output === undefined ? NodePath.join(stateDir, "runs", run.runId, "logs") : undefined
            )
          )
        )
      )
    )
).pipe(
  Command.withDescription(
    "Show one run (default: the latest) agent by agent; during a run, what each agent waits for or how long it has run"
  ),
  Command.withExamples([
    { command: "corral status", description: "the latest run, live while it runs" },
    { command: "corral status 20261125-231816-k3f9", description: "one run" }
  ])
)

const agentOf = (run: RunRecord, agentId: string) => {
  const agent = run.agents.find((known) => known.agentId === agentId)
  if (agent !== undefined) return Effect.succeed(agent)
  const ids = run.agents.map((known) => known.agentId)
  return invalidInput(
    `run ${run.runId} has no agent ${JSON.stringify(agentId)}; its agents: ${ids.slice(0, 20).join(", ")}${ids.length > 20 ? ", …" : ""}`
  )
}

/**
 * The log file of `agentId` in a recorded run. Both names are resolved against the run's records,
 * never used as paths, so `../../x` names no agent.
 *
 * @since 0.1.0
 */
export const logFileOf = (stateDir: string, run: RunRecord, agentId: string) =>
  Effect.gen(function* () {
    const agent = yield* agentOf(run, agentId)
    const logs = NodePath.join(stateDir, "runs", run.runId, "logs")
    const file = NodePath.join(logs, `${agent.agentId}.log`)
    if (NodePath.dirname(file) !== logs) return yield* invalidInput(`agent ${JSON.stringify(agentId)} has no log file`)
    return { agent, file }
  })

/**
 * Copies the agent's log at `file` from its start until the agent has an outcome or the run is no
 * longer running, judged by its coordinator's liveness as `corral status` judges it: a killed run
 * ends the follow (said on stderr) rather than leaving it waiting for an outcome no one will record.
 * A retry's next attempt writes `file` afresh: the follow reads the rest of the attempt before, says
 * so on stderr and goes on with the next one from its start.
 */
const followUntilDone = (
  ledger: RunLedger.Service,
  liveness: RunLiveness.Service,
  runId: string,
  agentId: string,
  file: string
): Effect.Effect<void, RunLedger.RunLedgerError> =>
  LogFollow.following(
    file,
    (text) => OutputGuard.write(process.stdout, text),
    () => OutputGuard.write(process.stderr, `agent ${agentId}: the next attempt's output follows\n`),
    (copy) =>
      Effect.gen(function* () {
        while (true) {
          const record = Option.getOrUndefined(yield* ledger.getRun(runId))
          const now = record === undefined ? undefined : yield* withLiveness(liveness, record)
          const agent = now?.agents.find((known) => known.agentId === agentId)
          const finished = now === undefined || now.status !== "running" || agent?.outcome !== null
          copy()
          if (now?.status === "crashed")
            OutputGuard.write(process.stderr, `run ${runId} crashed (${now.stopReason}); not following any more\n`)
          if (finished || OutputGuard.isClosed()) return
          yield* Effect.sleep("200 millis")
        }
      })
  )

const copyAll = (file: string): void => {
  if (NodeFs.existsSync(file)) OutputGuard.write(process.stdout, NodeFs.readFileSync(file, "utf8"))
}

const lineageOf = (run: { readonly runId: string; readonly options: unknown }) =>
  (run.options as { lineage?: string } | null)?.lineage ?? run.runId

/**
 * `logs --cluster`: the output the runners stored for the agent's executions in this run and in the
 * runs of its lineage before it (a resumed run takes over executions of the run it resumes), each
 * execution announced on stderr. With `--follow`, until the agent has an outcome or the run ended.
 */
const clusterLogs = (
  ledger: RunLedger.Service,
  liveness: RunLiveness.Service,
  output: OutputReader,
  run: RunRecord,
  agentId: string,
  follow: boolean
) =>
  Effect.gen(function* () {
    const agent = yield* agentOf(run, agentId)
    const summaries = yield* ledger.listRuns()
    const self = summaries.find((known) => known.runId === run.runId)
    const lineage = self === undefined ? run.runId : lineageOf(self)
    const runIds = summaries
      .filter((known) => lineageOf(known) === lineage && known.startedAt <= run.startedAt)
      .map((known) => known.runId)
    let after = 0
    let execution = ""
    const copy = Effect.flatMap(
      Effect.suspend(() => output(runIds, agent.agentId, after)),
      (lines) =>
        Effect.sync(() => {
          for (const line of lines) {
            const at = `run ${line.runId} attempt ${line.attempt} on runner ${line.runner}`
            if (at !== execution) OutputGuard.write(process.stderr, `── ${(execution = at)}\n`)
            OutputGuard.write(process.stdout, `${line.text}\n`)
            after = line.id
          }
          return lines.length
        })
    )
    const first = yield* copy
    const live = (yield* withLiveness(liveness, run)).status === "running" && agent.outcome === null
    if (first === 0 && !(follow && live)) {
      return yield* invalidInput(
        agent.outcome === null
          ? `agent ${agentId} of run ${run.runId} has no stored output yet (not started, or it printed nothing so far)`
          : `agent ${agentId} of run ${run.runId} ended ${OutcomeText.word(agent.outcome)} with no stored output`
      )
    }
    while (follow && !OutputGuard.isClosed()) {
      const record = Option.getOrUndefined(yield* ledger.getRun(run.runId))
      const now = record === undefined ? undefined : yield* withLiveness(liveness, record)
      const done =
        now === undefined ||
        now.status !== "running" ||
        now.agents.find((known) => known.agentId === agent.agentId)?.outcome !== null
      yield* copy
      if (done) return
      yield* Effect.sleep("200 millis")
    }
  })

/**
 * `corral logs [RUN_ID] AGENT [--follow]`.
 *
 * @since 0.1.0
 */
export const logs = Command.make(
  "logs",
  {
    ...location,
    first: Argument.String("run-id-or-agent").pipe(
      Argument.withDescription("The run id then the agent, or only the agent (of the latest run)"),
      Argument.optional
    ),
    second: Argument.String("agent").pipe(Argument.optional),
    follow: Flag.Boolean("follow").pipe(
      Flag.withAlias("f"),
      Flag.withDefault(false),
      Flag.withDescription("Keep printing the agent's output until it finishes")
    )
  },
  (flags) =>
    withLedger(flags, ({ ledger, liveness, output }, stateDir) =>
      Effect.gen(function* () {
        if (Option.isNone(flags.first)) {
          const latest = yield* findRun(ledger, Option.none())
          return yield* invalidInput(
            `which agent? corral logs [<run-id>] <agent>; the agents of the latest run ${latest.runId}: ${latest.agents.map((agent) => agent.agentId).join(", ")}`
          )
        }
        const [runId, agentId] = Option.isSome(flags.second)
          ? [flags.first, flags.second.value]
          : [Option.none<string>(), flags.first.value]
        const found = yield* findRun(ledger, runId)
        if (Option.isNone(runId)) yield* Effect.sync(() => OutputGuard.write(process.stderr, `run ${found.runId}\n`))
        if (output !== undefined) return yield* clusterLogs(ledger, liveness, output, found, agentId, flags.follow)
        if (found.status === "discarded")
          return yield* invalidInput(
            `run ${found.runId} was discarded (corral discard removed its branches and folders, its logs with them); no output to show`
          )
        const run = yield* withLiveness(liveness, found)
        const { agent, file } = yield* logFileOf(stateDir, run, agentId)
        const earlier =
          agent.outcome === null || NodeFs.existsSync(file)
            ? undefined
            : AttemptLogs.latestKept(NodePath.dirname(file), agent.agentId, agent.attempts)
        if (earlier !== undefined) {
          yield* Effect.sync(() =>
            OutputGuard.write(
              process.stderr,
              `agent ${agent.agentId}: attempt ${agent.attempts} ended ${OutcomeText.word(agent.outcome!)} without starting a process; the output of attempt ${earlier.attempt} (${earlier.log}):\n`
            )
          )
          return copyAll(earlier.log)
        }
        if (!NodeFs.existsSync(file) && !(flags.follow && run.status === "running")) {
          return yield* invalidInput(
            agent.outcome !== null
              ? `agent ${agentId} of run ${run.runId} ended ${OutcomeText.word(agent.outcome)} without starting a process, so it has no output`
              : run.status === "running"
                ? `agent ${agentId} of run ${run.runId} has not started, so it has no output yet`
                : `agent ${agentId} of run ${run.runId} has no output: the run ${run.status === "crashed" ? `crashed (${run.stopReason})` : `ended ${run.status}`} before it started`
          )
        }
        const attempts = StatusView.attemptLines(agent, NodePath.dirname(file))
        if (attempts.length > 0)
          yield* Effect.sync(() =>
            OutputGuard.write(
              process.stderr,
              `agent ${agent.agentId}: the output of attempt ${agent.attempts}; each attempt's folder and log:\n${attempts.map((line) => `  ${line}\n`).join("")}`
            )
          )
        if (flags.follow) yield* followUntilDone(ledger, liveness, run.runId, agent.agentId, file)
        else copyAll(file)
      })
    )
).pipe(
  Command.withDescription("Print the output of one agent of a run (default: the latest run)"),
  Command.withExamples([
    { command: "corral logs tests", description: "agent tests of the latest run (the run used is printed on stderr)" },
    { command: "corral logs 20261125-231816-k3f9 tests", description: "agent tests of one run" },
    { command: "corral logs tests --follow", description: "keep printing while it runs" }
  ])
)

const writeOut = (what: string, file: string, text: () => string) =>
  Folder.make(NodePath.dirname(NodePath.resolve(file))).pipe(
    Effect.mapError((error) => error.message),
    Effect.andThen(
      Effect.try({
        try: () => NodeFs.writeFileSync(file, text()),
        catch: (error) => (error as Error).message
      })
    ),
    Effect.matchEffect({
      onFailure: (message) => invalidInput(`cannot write the ${what} to ${file}: ${message}`),
      onSuccess: () => print(`${what}: ${NodePath.resolve(file)}`)
    })
  )

/**
 * `corral report [RUN_ID] [--html FILE] [--trace FILE]`.
 *
 * @since 0.1.0
 */
export const report = Command.make(
  "report",
  {
    ...location,
    runId: Argument.String("run-id").pipe(Argument.optional),
    html: Flag.String("html").pipe(
      Flag.optional,
      Flag.withDescription("Write the HTML timeline here (default: <state-dir>/runs/<run-id>/report.html)")
    ),
    trace: Flag.String("trace").pipe(
      Flag.optional,
      Flag.withDescription(
        "Write the Chrome trace-event JSON here (Perfetto, chrome://tracing; default: <state-dir>/runs/<run-id>/trace.json)"
      )
    )
  },
  (flags) =>
    withLedger(flags, ({ ledger, liveness }, stateDir) =>
      Effect.gen(function* () {
        const run = yield* Effect.flatMap(findRun(ledger, flags.runId), (run) => withLiveness(liveness, run))
        if (run.status === "discarded")
          return yield* invalidInput(
            `run ${run.runId} was discarded (corral discard removed its branches and folders); nothing to report`
          )
        const dir = NodePath.join(stateDir, "runs", run.runId)
        const neither = Option.isNone(flags.html) && Option.isNone(flags.trace)
        const html = neither ? Option.some(NodePath.join(dir, "report.html")) : flags.html
        const trace = neither ? Option.some(NodePath.join(dir, "trace.json")) : flags.trace
        if (Option.isSome(html)) yield* writeOut("report", html.value, () => Report.html(run))
        if (Option.isSome(trace)) yield* writeOut("trace", trace.value, () => JSON.stringify(Report.trace(run)))
      })
    )
).pipe(
  Command.withDescription("Write a run's timeline as HTML and as a Chrome trace, by default into the run's folder"),
  Command.withExamples([
    { command: "corral report", description: "the latest run, into <state-dir>/runs/<run-id>/" },
    { command: "corral report --html report.html --trace trace.json", description: "the latest run, to these files" }
  ])
)
