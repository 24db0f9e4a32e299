import { createServer } from "node:net"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as RunnerLabels from "@corral/cluster/RunnerLabels"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Reactivity from "effect/reactivity/Reactivity"
import { type CliExit, invalidInput } from "../CliExit.ts"
import * as OutputGuard from "../OutputGuard.ts"
import * as Paths from "../Paths.ts"
import * as RunnerNotices from "../RunnerNotices.ts"

/** The cluster packages (effect/cluster, the Postgres driver), loaded only by the commands that use them. */
const cluster = Effect.promise(async () => {
  const [{ Runner, RunnerRegistry }, { PostgresClient }] = await Promise.all([
    import("@corral/cluster"),
    import("@corral/postgres")
  ])
  return { Runner, RunnerRegistry, PostgresClient }
})

const clusterFlag = Flag.String("cluster").pipe(
  Flag.withFallbackConfig(Config.String("CORRAL_CLUSTER")),
  Flag.optional,
  Flag.withDescription("The cluster's Postgres URL (default: $CORRAL_CLUSTER)")
)

/**
 * The port the runner will listen on: `port`, or a free one (0), once a listener on `host` got it;
 * exit 2 naming the address when it cannot (in use, not an address of this machine).
 */
const listenable = (host: string, port: number) =>
  Effect.callback<number, CliExit>((resume) => {
    const listener = createServer()
    listener.once("error", (error: NodeJS.ErrnoException) =>
      resume(invalidInput(`cannot listen on ${host}:${port} (--host, --port): ${error.message}`))
    )
    listener.listen(port, host, () => {
      const address = listener.address()
      const bound = typeof address === "object" && address !== null ? address.port : port
      listener.close(() => resume(Effect.succeed(bound)))
    })
  })

/** The URL, or exit 2 when it is missing or the database cannot be reached. */
const clusterUrl = (flag: Option.Option<string>) =>
  Effect.gen(function* () {
    if (Option.isNone(flag)) return yield* invalidInput("--cluster <postgres-url> (or CORRAL_CLUSTER) is required")
    const url = flag.value
    const { PostgresClient } = yield* cluster
    yield* Effect.scoped(PostgresClient.make(url, { maxConnections: 1 })).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchTag("PostgresUnavailable", (error) => invalidInput(error.message))
    )
    return url
  })

/** The labels of `--labels` (split at `,`, trimmed, empty ones dropped), or exit 2 naming the one `RunnerLabels.labelsProblem` refuses. */
const labelsOf = (flag: Option.Option<string>): Effect.Effect<ReadonlyArray<string>, CliExit> => {
  if (Option.isNone(flag)) return Effect.succeed([])
  const labels = flag.value
    .split(",")
    .map((label) => label.trim())
    .filter((label) => label !== "")
  const problem = RunnerLabels.labelsProblem(labels)
  return problem === undefined ? Effect.succeed(labels) : invalidInput(`--labels ${flag.value}: ${problem}`)
}

/**
 * `corral runner`: executes agents of cluster runs until Ctrl-C.
 *
 * @since 0.1.0
 */
export const runner = Command.make(
  "runner",
  {
    cluster: clusterFlag,
    capacity: Flag.Int("capacity").pipe(
      Flag.withDefault(8),
      Flag.withDescription("Most agents run at once (default: 8)")
    ),
    labels: Flag.String("labels").pipe(
      Flag.optional,
      Flag.withDescription("Comma-separated labels, e.g. gpu,linux: agents that require one may run here")
    ),
    repo: Flag.String("repo").pipe(
      Flag.optional,
      Flag.withDescription("Where process agents run (default: current directory)")
    ),
    host: Flag.String("host").pipe(
      Flag.withDefault("127.0.0.1"),
      Flag.withDescription("The address other runners and coordinators reach this runner at (default: 127.0.0.1)")
    ),
    port: Flag.Int("port").pipe(Flag.optional, Flag.withDescription("The port to listen on (default: a free one)"))
  },
  (flags) =>
    Effect.gen(function* () {
      if (flags.capacity < 1) return yield* invalidInput(`--capacity ${flags.capacity}: expected a positive integer`)
      if (Option.isSome(flags.port) && !(flags.port.value >= 1 && flags.port.value <= 65535))
        return yield* invalidInput(`--port ${flags.port.value}: expected a port number from 1 to 65535`)
      const { repo, stateDir } = yield* Paths.resolve(flags.repo, Option.none())
      const labels = yield* labelsOf(flags.labels)
      const url = yield* clusterUrl(flags.cluster)
      const { Runner, PostgresClient } = yield* cluster
      const port = yield* listenable(
        flags.host,
        Option.getOrElse(flags.port, () => 0)
      )
      const said = (line: string) => OutputGuard.write(process.stderr, `${line}\n`)
      return yield* Runner.serve(
        { url, host: flags.host, port, capacity: flags.capacity, labels, repo, stateDir },
        (address) =>
          Console.log(
            `runner ${address} ready (capacity ${flags.capacity}${labels.length > 0 ? `, labels ${labels.join(",")}` : ""})`
          )
      ).pipe(RunnerNotices.around(`${flags.host}:${port}`, PostgresClient.redact(url), said))
    })
).pipe(
  Command.withDescription("Execute agents of cluster runs in this process until Ctrl-C"),
  Command.withExamples([
    { command: "corral runner --cluster postgres://corral@db:5432/corral --capacity 8", description: "join a cluster" }
  ])
)

/**
 * `corral runners`: lists the runners online.
 *
 * @since 0.1.0
 */
export const runners = Command.make(
  "runners",
  {
    cluster: clusterFlag,
    json: Flag.Boolean("json").pipe(Flag.withDefault(false), Flag.withDescription("Print one JSON object per runner"))
  },
  (flags) =>
    Effect.gen(function* () {
      const url = yield* clusterUrl(flags.cluster)
      const { PostgresClient, RunnerRegistry } = yield* cluster
      const list = yield* RunnerRegistry.list().pipe(
        Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
        Effect.catch((error) => invalidInput(error.message))
      )
      if (flags.json) {
        for (const info of list) yield* Console.log(JSON.stringify(info))
        return
      }
      if (list.length === 0) return yield* Console.log("no runners online")
      for (const info of list) {
        const labels = info.labels.length === 0 ? "-" : info.labels.join(",")
        yield* Console.log(
          `${info.address}  pid ${info.pid} on ${info.hostname}  running ${info.running}/${info.capacity}  labels ${labels}  seen ${(info.idleMs / 1000).toFixed(1)}s ago`
        )
      }
    })
).pipe(
  Command.withDescription("List the runners online in a cluster, with capacity, load and labels"),
  Command.withExamples([
    { command: "corral runners --cluster postgres://corral@db:5432/corral", description: "one line per live runner" },
    {
      command: "CORRAL_CLUSTER=postgres://corral@db:5432/corral corral runners --json",
      description: "one JSON object per runner"
    }
  ])
)
