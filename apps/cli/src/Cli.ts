/**
 * The `corral` command.
 *
 * A command line names one subcommand, so only that subcommand's modules are loaded (`load`): the
 * others (reports, history, cluster runners...) cost nothing at start-up. Without a known
 * subcommand name in first position (`corral --help`, `corral --version`, a typo) every subcommand
 * is loaded, so help, suggestions and errors are those of the full command.
 *
 * @since 0.1.0
 */
import * as Command from "effect/cli/Command"
import type { discard } from "./commands/discard.ts"
import type { gc } from "./commands/gc.ts"
import type { logs, report, runs, status } from "./commands/history.ts"
import type { init } from "./commands/init.ts"
import type { run } from "./commands/run.ts"
import type { runner, runners } from "./commands/runner.ts"
import type { validate } from "./commands/validate.ts"

/**
 * @since 0.1.0
 */
export const version = "0.1.0"

type Subcommand =
  | typeof init
  | typeof run
  | typeof validate
  | typeof runs
  | typeof status
  | typeof logs
  | typeof report
  | typeof discard
  | typeof gc
  | typeof runner
  | typeof runners

const history = () => import("./commands/history.ts")
const runnerCommands = () => import("./commands/runner.ts")

/** Each subcommand by name, loaded on demand, in the order `corral --help` lists them. */
const subcommands: ReadonlyArray<readonly [string, () => Promise<Subcommand>]> = [
  ["init", () => import("./commands/init.ts").then((m) => m.init)],
  ["run", () => import("./commands/run.ts").then((m) => m.run)],
  ["validate", () => import("./commands/validate.ts").then((m) => m.validate)],
  ["runs", () => history().then((m) => m.runs)],
  ["status", () => history().then((m) => m.status)],
  ["logs", () => history().then((m) => m.logs)],
  ["report", () => history().then((m) => m.report)],
  ["discard", () => import("./commands/discard.ts").then((m) => m.discard)],
  ["gc", () => import("./commands/gc.ts").then((m) => m.gc)],
  ["runner", () => runnerCommands().then((m) => m.runner)],
  ["runners", () => runnerCommands().then((m) => m.runners)]
]

const make = (commands: ReadonlyArray<Subcommand>) =>
  Command.make("corral").pipe(
    Command.withDescription("Run many agents at once, safely: bounded, claim-aware, isolated in git worktrees"),
    Command.withSubcommands(commands),
    Command.withExamples([
      { command: "corral init", description: "write corral.yaml, a starter plan for this repository" },
      { command: "corral run corral.yaml", description: "run it; the summary says how to take the merged work" },
      { command: "corral status", description: "the latest run agent by agent, live while it runs" },
      { command: "corral logs tests --follow", description: "the output of agent tests of the latest run" },
      { command: "corral report", description: "an HTML timeline and a trace of the latest run, in its folder" },
      {
        command: "corral discard --all-merged",
        description: "remove the branches and worktrees of runs that succeeded"
      }
    ])
  )

/**
 * The `corral` command for the arguments `args` (without `node` and the script): only the
 * subcommand named first, or all of them when none is.
 *
 * @since 0.1.0
 */
export const load = async (args: ReadonlyArray<string>) => {
  const named = subcommands.find(([name]) => name === args[0])
  const chosen = named === undefined ? subcommands : [named]
  return make(await Promise.all(chosen.map(([, loadOne]) => loadOne())))
}
