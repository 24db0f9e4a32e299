/**
 * A runner process: joins the cluster, registers the built-in process kind (and any others given),
 * stores its agents' output in the cluster's database (`AgentOutput`: a process agent's output lines,
 * the log lines of other kinds' agents), announces itself in the runner registry, and executes agents until interrupted. Interrupting it
 * (Ctrl-C) stops taking work and hands back what it runs: the sharding layer releases its shards
 * and its unfinished agents' persisted messages are delivered to the next owners.
 *
 * @since 0.1.0
 */
import { statSync } from "node:fs"
import type * as AgentKind from "@corral/core/AgentKind"
import * as Executor from "@corral/core/Executor"
import { PostgresClient, PostgresOptions } from "@corral/postgres"
import { NodeServices } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as AgentOutput from "./AgentOutput.ts"
import * as Cluster from "./Cluster.ts"
import { checkLabels } from "./internal/runnerLabels.ts"
import { CurrentRunnerWorkspaces, makeRunnerWorkspaces } from "./internal/runnerWorkspace.ts"
import { ProcessKind, RunnerName, RunnerRepo } from "./ProcessKind.ts"
import * as RunnerLabels from "./RunnerLabels.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends Cluster.RunnerOptions {
  /** Where `corral/process` agents run (relative `cwd`s resolve against it); a folder. @default process.cwd() */
  readonly repo?: string | undefined
  /** The folder of the runner's workspaces and its agents' private folders. @default "<repo>/.corral" */
  readonly stateDir?: string | undefined
  /** Kinds besides the built-in `corral/process`. */
  readonly kinds?: ReadonlyArray<AgentKind.AgentKind<any, any, any, never>> | undefined
}

/**
 * Why `labels` cannot be a runner's labels, `undefined` when they can: the first label that is
 * empty, begins or ends with a space, contains `#`, `~` or `,` (an agent requiring a label is sent to
 * the entity `<runId>/<agentId>~<salt>#<label>`, read back at `#` and `~`; `,` separates
 * `corral runner --labels`), or is given twice. The rule `serve` and `Cluster.layerRunner` apply;
 * an agent's `requires` label can be placed only when `labelsProblem([requires])` is `undefined`.
 * The same function as `RunnerLabels.labelsProblem` (`@corral/cluster/RunnerLabels`, which loads
 * nothing else).
 *
 * @example
 * ```ts
 * import { Runner } from "@corral/cluster"
 *
 * Runner.labelsProblem(["gpu", "linux"]) // undefined
 * Runner.labelsProblem(["gpu#1"]) // 'a label must not contain "#", "~" or ",", got "gpu#1"'
 * Runner.labelsProblem(["gpu", "gpu"]) // '"gpu" is given twice'
 * ```
 * @since 0.1.0
 * @category running
 */
export const labelsProblem: (labels: ReadonlyArray<string>) => string | undefined = RunnerLabels.labelsProblem

/**
 * Serves until interrupted; `onReady` runs once the runner is registered and takes work. A `repo`
 * that is not a folder or a malformed label (see `Cluster.RunnerOptions.labels`), checked before it
 * connects, and the settings `Cluster.layerRunner` refuses, make it die with
 * `PostgresOptions.InvalidOption` naming the option before the runner joins the cluster. A server
 * that refuses its tables or queries (a role without `CREATE` on the schema) fails it with
 * `PostgresClient.StartFailed` naming `Runner.serve` and saying the server's answer.
 *
 * @example
 * ```ts
 * import { Runner } from "@corral/cluster"
 * import { NodeRuntime } from "@effect/platform-node"
 * import { Console } from "effect"
 *
 * NodeRuntime.runMain(
 *   Runner.serve({ url: "postgres://postgres@127.0.0.1:5432/corral", port: 9001, capacity: 8 }, (address) =>
 *     Console.log(`runner ${address} ready`)
 *   )
 * )
 * ```
 * @since 0.1.0
 * @category running
 */
export const serve = <E, R>(options: Options, onReady: (address: string) => Effect.Effect<void, E, R>) =>
  Effect.gen(function* () {
    const repo = options.repo ?? process.cwd()
    if (statSync(repo, { throwIfNoEntry: false })?.isDirectory() !== true)
      return yield* Effect.die(
        new PostgresOptions.InvalidOption({ module: "Runner", option: "repo", reason: `not a folder: ${repo}` })
      )
    yield* checkLabels("Runner", options.labels ?? [])
    const address = `${options.host ?? "127.0.0.1"}:${options.port}`
    const capacity = options.capacity ?? Cluster.defaults.capacity
    yield* start(options, repo, address, capacity).pipe(PostgresClient.starting("Runner.serve"))
    yield* onReady(address)
    return yield* Effect.never
  }).pipe(Effect.scoped)

/** Connects, creates the output table, and joins the cluster as a registered runner. */
const start = (options: Options, repo: string, address: string, capacity: number) =>
  Effect.gen(function* () {
    const registry = yield* Layer.build(
      PostgresClient.layer(options.url, { maxConnections: 3, applicationName: `corral-runner ${address}` })
    )
    const output = yield* AgentOutput.make(address).pipe(Effect.provideContext(registry))
    const kinds = Executor.layerKinds([ProcessKind, ...(options.kinds ?? []).map(AgentOutput.capturingLogs)]).pipe(
      Layer.provide(NodeServices.layer),
      Layer.provide(Layer.succeed(RunnerRepo, repo)),
      Layer.provide(Layer.succeed(RunnerName, address)),
      Layer.provide(Layer.succeed(AgentOutput.CurrentSink, output)),
      Layer.provide(Layer.sync(CurrentRunnerWorkspaces, () => makeRunnerWorkspaces(options.stateDir)))
    )
    // registers it in the runner registry too (capacity, labels, load, shards)
    yield* Layer.build(Cluster.layerRunner({ ...options, capacity }).pipe(Layer.provide(kinds)))
  })
