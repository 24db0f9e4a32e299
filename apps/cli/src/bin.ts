#!/usr/bin/env node
import { Workspace } from "@corral/platform-node/Workspace"
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect, Layer, References } from "effect"
import { CliError, Command } from "effect/cli"
import { cli, version } from "./Cli.ts"
import { CliExit } from "./CliExit.ts"

Command.run(cli, { version }).pipe(
  Effect.catchIf(CliError.isCliError, () => Effect.fail(new CliExit({ code: 2 }))),
  Effect.provide(Layer.mergeAll(NodeServices.layer, Workspace.layer)),
  Effect.provideService(References.MinimumLogLevel, "Error"),
  NodeRuntime.runMain
)
