import * as SpawnHelper from "@corral/platform-node/SpawnHelper"
import { Workspace } from "@corral/platform-node/Workspace"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as CliError from "effect/cli/CliError"
import * as Command from "effect/cli/Command"
import { load, version } from "./Cli.ts"
import { CliExit } from "./CliExit.ts"
import * as EarlySignals from "./EarlySignals.ts"
import * as OutputGuard from "./OutputGuard.ts"
import * as KillPoint from "./internal/killPoint.ts"
import { runMain } from "./RunMain.ts"

OutputGuard.install()
// SIGHUP (the terminal closed) ends a command as SIGTERM does, unless the command listens for it
// itself (`corral run` stops its agents): Node's default would end the process at once.
process.on("SIGHUP", () => {
  if (process.listenerCount("SIGHUP") === 1) process.emit("SIGTERM", "SIGTERM")
})

const reported = (error: unknown) =>
  Effect.andThen(
    Effect.sync(() => process.stderr.write(`corral: ${error instanceof Error ? error.message : String(error)}\n`)),
    Effect.fail(new CliExit({ code: 1 }))
  )

if (process.argv[2] === "run") await Effect.runPromise(KillPoint.waitAt("loading", "run"))
const cli = await load(process.argv.slice(2))
if (process.argv[2] === "run") KillPoint.blockAt("loaded-busy", "run")

Command.run(cli, { version }).pipe(
  Effect.catchIf(CliError.isCliError, () => Effect.fail(new CliExit({ code: 2 }))),
  Effect.catchIf((error) => !(error instanceof CliExit), reported),
  Effect.provide(Layer.mergeAll(NodeServices.layer, Workspace.layer)),
  // The helper, reaped, brings the CPU time of the git commands and agents it started into ours.
  Effect.ensuring(SpawnHelper.stop),
  Effect.provideService(References.MinimumLogLevel, "Error"),
  runMain
)
EarlySignals.handOver()
