/**
 * The `corral` command.
 *
 * @since 0.1.0
 */
import * as Command from "effect/cli/Command"
import { discard } from "./commands/discard.ts"
import { gc } from "./commands/gc.ts"
import { logs, report, runs, status } from "./commands/history.ts"
import { init } from "./commands/init.ts"
import { run } from "./commands/run.ts"
import { runner, runners } from "./commands/runner.ts"
import { validate } from "./commands/validate.ts"

/**
 * @since 0.1.0
 */
export const version = "0.1.0"

/**
 * @since 0.1.0
 */
export const cli = Command.make("corral").pipe(
  Command.withDescription("Run many agents at once, safely: bounded, claim-aware, isolated in git worktrees"),
  Command.withSubcommands([init, run, validate, runs, status, logs, report, discard, gc, runner, runners]),
  Command.withExamples([
    { command: "corral init", description: "write corral.yaml, a starter plan for this repository" },
    { command: "corral run corral.yaml", description: "run it; the summary says how to take the merged work" },
    { command: "corral status", description: "the latest run agent by agent, live while it runs" },
    { command: "corral logs tests --follow", description: "the output of agent tests of the latest run" },
    { command: "corral report", description: "an HTML timeline and a trace of the latest run, in its folder" },
    { command: "corral discard --all-merged", description: "remove the branches and worktrees of runs that succeeded" }
  ])
)
