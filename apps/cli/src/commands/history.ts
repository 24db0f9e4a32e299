import * as RunLedger from "@corral/platform-node/RunLedger"
import type { RunRecord } from "@corral/platform-node/RunRecord"
import { Config, Console, Context, Effect, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { type CliExit, invalidInput } from "../CliExit.ts"
import { resolve } from "../Paths.ts"
import * as Report from "../Report.ts"

const location = {
  repo: Flag.String("repo").pipe(
    Flag.optional,
    Flag.withDescription("The target repository (default: current directory)")
  ),
  stateDir: Flag.String("state-dir").pipe(Flag.optional, Flag.withDescription("corral's state directory")),
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

/** The cluster's ledger in Postgres; the driver is loaded only here. */
const clusterLedger = (url: string) =>
  Effect.gen(function* () {
    const { PostgresLedger } = yield* Effect.promise(() => import("@corral/postgres"))
    const context = yield* Layer.build(PostgresLedger.layer(url, { maxConnections: 2 })).pipe(
      Effect.catchTag("PostgresUnavailable", (error) => invalidInput(error.message))
    )
    return Context.get(context, RunLedger.RunLedger)
  })

const withLedger = <A>(
  flags: Location,
  f: (ledger: RunLedger.Service, stateDir: string) => Effect.Effect<A, CliExit | RunLedger.RunLedgerError>
) =>
  Effect.gen(function* () {
    const url = clusterUrl(flags)
    if (url !== undefined) {
      return yield* Effect.scoped(Effect.flatMap(clusterLedger(url), (ledger) => f(ledger, ""))).pipe(
        Effect.catchTag("RunLedgerError", (error: RunLedger.RunLedgerError) =>
          invalidInput(`cannot read the run ledger: ${error.message}`)
        )
      )
    }
    const paths = yield* resolve(flags.repo, flags.stateDir)
    const file = NodePath.join(paths.stateDir, "ledger.db")
    if (!NodeFs.existsSync(file)) return yield* invalidInput(`no runs recorded in ${paths.stateDir}`)
    const use = Effect.gen(function* () {
      return yield* f(yield* RunLedger.RunLedger, paths.stateDir)
    })
    return yield* use.pipe(
      Effect.provide(RunLedger.layerSqlite(file)),
      Effect.catchTag("RunLedgerError", (error: RunLedger.RunLedgerError) =>
        invalidInput(`cannot read the run ledger: ${error.message}`)
      )
    )
  })

const findRun = (ledger: RunLedger.Service, runId: Option.Option<string>) =>
  Effect.gen(function* () {
    const id = Option.isSome(runId) ? runId.value : (yield* ledger.listRuns())[0]?.runId
    if (id === undefined) return yield* invalidInput("no runs recorded yet")
    const run = yield* ledger.getRun(id)
    if (Option.isNone(run)) return yield* invalidInput(`no recorded run ${id}`)
    return run.value
  })

const time = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19)
const duration = (from: number | null, to: number | null) =>
  from === null || to === null ? "-" : `${((to - from) / 1000).toFixed(1)}s`

/**
 * `corral runs`.
 *
 * @since 0.1.0
 */
export const runs = Command.make("runs", location, (flags) =>
  withLedger(flags, (ledger) =>
    Effect.gen(function* () {
      for (const run of yield* ledger.listRuns()) {
        yield* Console.log(
          `${run.runId}  ${run.status.padEnd(11)} ${time(run.startedAt)}  ${duration(run.startedAt, run.endedAt).padStart(7)}  ${run.succeeded}/${run.total} succeeded  ${run.planFile}`
        )
      }
    })
  )
).pipe(Command.withDescription("List recorded runs, newest first"))

const statusText = (run: RunRecord): string => {
  const lines = [
    `run ${run.runId}: ${run.status}, plan ${run.planFile}, started ${time(run.startedAt)}, ${duration(run.startedAt, run.endedAt)}`
  ]
  for (const agent of run.agents) {
    lines.push(
      `  ${agent.agentId.padEnd(20)} ${(agent.outcome ?? "pending").padEnd(13)} ${duration(agent.startedAt, agent.endedAt).padStart(7)}  ${agent.attempts} attempt(s)  ${agent.detail}`
    )
  }
  return lines.join("\n")
}

/**
 * `corral status [RUN_ID]`.
 *
 * @since 0.1.0
 */
export const status = Command.make(
  "status",
  { ...location, runId: Argument.String("run-id").pipe(Argument.optional) },
  (flags) =>
    withLedger(flags, (ledger) => Effect.flatMap(findRun(ledger, flags.runId), (run) => Console.log(statusText(run))))
).pipe(Command.withDescription("Show one run (default: the latest) agent by agent"))

/**
 * `corral logs RUN_ID AGENT`.
 *
 * @since 0.1.0
 */
export const logs = Command.make(
  "logs",
  { ...location, runId: Argument.String("run-id"), agent: Argument.String("agent") },
  (flags) =>
    withLedger(flags, (_ledger, stateDir) =>
      Effect.gen(function* () {
        if (clusterUrl(flags) !== undefined)
          return yield* invalidInput(
            "with --cluster, agents' output stays on the runners; `corral logs` reads local runs"
          )
        const file = NodePath.join(stateDir, "runs", flags.runId, "logs", `${flags.agent}.log`)
        if (!NodeFs.existsSync(file))
          return yield* invalidInput(`no log for agent ${flags.agent} of run ${flags.runId} (${file})`)
        process.stdout.write(NodeFs.readFileSync(file, "utf8"))
      })
    )
).pipe(Command.withDescription("Print the output of one agent of a run"))

/**
 * `corral report RUN_ID --html FILE --trace FILE`.
 *
 * @since 0.1.0
 */
export const report = Command.make(
  "report",
  {
    ...location,
    runId: Argument.String("run-id").pipe(Argument.optional),
    html: Flag.String("html").pipe(Flag.optional, Flag.withDescription("Write a self-contained HTML timeline here")),
    trace: Flag.String("trace").pipe(
      Flag.optional,
      Flag.withDescription("Write Chrome trace-event JSON here (Perfetto, chrome://tracing)")
    )
  },
  (flags) =>
    withLedger(flags, (ledger) =>
      Effect.gen(function* () {
        if (Option.isNone(flags.html) && Option.isNone(flags.trace))
          return yield* invalidInput("give --html FILE, --trace FILE or both")
        const run = yield* findRun(ledger, flags.runId)
        if (Option.isSome(flags.html)) {
          NodeFs.writeFileSync(flags.html.value, Report.html(run))
          yield* Console.log(`wrote ${flags.html.value}`)
        }
        if (Option.isSome(flags.trace)) {
          NodeFs.writeFileSync(flags.trace.value, JSON.stringify(Report.trace(run)))
          yield* Console.log(`wrote ${flags.trace.value}`)
        }
      })
    )
).pipe(
  Command.withDescription("Write a run's timeline as HTML and as a Chrome trace"),
  Command.withExamples([
    { command: "corral report --html report.html --trace trace.json", description: "the latest run" }
  ])
)
