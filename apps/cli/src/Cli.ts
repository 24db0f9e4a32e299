/**
 * The `corral` command.
 *
 * @since 0.1.0
 */
import { Command } from "effect/cli"
import { gc } from "./commands/gc.ts"
import { logs, report, runs, status } from "./commands/history.ts"
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
  Command.withSubcommands([run, validate, runs, status, logs, report, gc, runner, runners])
)
