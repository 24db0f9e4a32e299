import { Deferred, Effect, Fiber, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { CliExit, invalidInput } from "../CliExit.ts"
import { newRunId, resolve } from "../Paths.ts"
import * as PlanFile from "../PlanFile.ts"
import * as Reporter from "../Reporter.ts"
import * as RunPlan from "../RunPlan.ts"
import * as Summary from "../Summary.ts"

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
    Flag.withDescription("Where corral keeps its state (default: <repo>/.corral or $CORRAL_HOME)")
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
}

const loadPlan = (file: string) =>
  PlanFile.load(file).pipe(Effect.catchTag("PlanFileError", (error) => invalidInput(`invalid plan\n${error.message}`)))

const interruptions = (stop: Deferred.Deferred<string>, reporter: Reporter.Reporter) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let count = 0
      const onSignal = (signal: NodeJS.Signals) => {
        count++
        if (count === 1) {
          reporter.note(`${signal === "SIGINT" ? "Ctrl-C" : signal}: stopping agents and cleaning up…`)
          Deferred.doneUnsafe(stop, Effect.succeed(signal === "SIGINT" ? "interrupted (Ctrl-C)" : `received ${signal}`))
        } else {
          reporter.note("cleanup in progress: agents are being stopped and workspaces cleaned; corral exits when done")
        }
      }
      process.on("SIGINT", onSignal)
      process.on("SIGTERM", onSignal)
      return onSignal
    }),
    (onSignal) =>
      Effect.sync(() => {
        process.off("SIGINT", onSignal)
        process.off("SIGTERM", onSignal)
      })
  )

const execute = (flags: Flags) =>
  Effect.gen(function* () {
    const paths = yield* resolve(flags.repo, flags.stateDir)
    const plan = yield* loadPlan(flags.plan)
    if (Option.isSome(flags.concurrency) && flags.concurrency.value < 1) {
      return yield* invalidInput(`--concurrency must be at least 1, got ${flags.concurrency.value}`)
    }
    const mode = Reporter.modeFor(flags.json, process.stdout)
    const reporter = Reporter.make(mode, plan.agents)
    const stop = yield* Deferred.make<string>()
    yield* interruptions(stop, reporter)
    const report = yield* RunPlan.run({
      plan,
      ...paths,
      runId: newRunId(),
      concurrency: Option.getOrUndefined(flags.concurrency),
      mode: Option.getOrUndefined(flags.mode),
      isolation: Option.getOrUndefined(flags.isolation),
      keepWorkspaces: flags.keepWorkspaces,
      onEvent: reporter.onEvent,
      stopOn: Deferred.await(stop)
    }).pipe(
      Effect.ensuring(Effect.sync(reporter.close)),
      Effect.catchTags({
        InvalidRun: (error) => invalidInput(error.message),
        NotAGitRepository: (error) =>
          invalidInput(`${error.message}\nuse --isolation directory or none, or run corral inside a git repository`),
        GitNotFound: (error) => invalidInput(error.message)
      })
    )
    const summary = Summary.render(report, { color: mode === "tty", columns: process.stdout.columns })
    if (mode === "json") process.stderr.write(`${summary}\n`)
    else process.stdout.write(`\n${summary}\n`)
    return Summary.exitCode(report)
  }).pipe(Effect.scoped)

/**
 * `corral run <plan>`.
 *
 * @since 0.1.0
 */
export const run = Command.make("run", flags, (flags) =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkDetach(execute(flags))
    const code = yield* Fiber.join(fiber).pipe(Effect.onInterrupt(() => Fiber.await(fiber)))
    if (code !== 0) return yield* new CliExit({ code })
  })
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
