/**
 * `pnpm demo:cluster`: a throwaway Postgres, three `corral runner` processes, twelve process agents
 * coordinated from this process; one runner is killed with SIGKILL while it runs agents, and the
 * run still finishes with one outcome per agent. Everything is stopped and deleted at the end.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { Cluster, ProcessKind, RunnerRegistry } from "@corral/cluster"
import { AgentKind, Corral, type CorralEvent } from "@corral/core"
import { PostgresClient, TestServer } from "@corral/postgres"
import { Console, Effect, Schedule } from "effect"

const corral = resolve(import.meta.dirname, "../../../apps/cli/bin/corral")

const startRunner = (url: string, repo: string, name: string) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess>((resume) => {
      const child = spawn(corral, ["runner", "--cluster", url, "--repo", repo, "--capacity", "2"], {
        stdio: ["ignore", "pipe", "inherit"]
      })
      child.stdout!.on("data", (chunk) => {
        const text = String(chunk)
        if (/ready/.test(text)) {
          process.stdout.write(`${name} (pid ${child.pid}): ${text}`)
          resume(Effect.succeed(child))
        }
      })
      child.once("exit", (code) => resume(Effect.die(new Error(`${name} exited with ${code}`))))
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

const program = Effect.gen(function* () {
  yield* Console.log("starting a throwaway Postgres...")
  const server = yield* TestServer.start()
  const url = yield* server.createDatabase("corral")
  yield* Console.log(`postgres at ${url}`)
  const repo = mkdtempSync(join(tmpdir(), "corral-demo-cluster-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(repo, { recursive: true, force: true })))
  const runners = yield* Effect.all(
    ["runner-1", "runner-2", "runner-3"].map((name) => startRunner(url, repo, name)),
    { concurrency: "unbounded" }
  )
  const names = new Map(runners.map((child, i) => [child.pid!, `runner-${i + 1}`]))
  const victim = runners[0]!
  const agents = Array.from({ length: 12 }, (_, i) =>
    AgentKind.agent(ProcessKind.ProcessKind, `job-${String(i + 1).padStart(2, "0")}`, {
      command: "sleep 3; echo done",
      shell: true
    })
  )
  const onEvent = (event: CorralEvent.CorralEvent) =>
    Effect.gen(function* () {
      if (event._tag !== "Finished") return
      const outcome = event.outcome
      const where =
        outcome._tag === "Succeeded" ? `on ${names.get((outcome.value as { runnerPid: number }).runnerPid)}` : ""
      yield* Console.log(`${event.agentId}: ${outcome._tag} ${where}`)
    })
  const victimBusy = RunnerRegistry.list().pipe(
    Effect.map((list) => list.some((runner) => runner.pid === victim.pid && runner.running > 0)),
    Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
    Effect.orElseSucceed(() => false),
    Effect.repeat({ schedule: Schedule.spaced("200 millis"), until: (busy) => busy })
  )
  yield* Effect.forkChild(
    Effect.andThen(victimBusy, () =>
      Effect.andThen(
        Effect.sync(() => victim.kill("SIGKILL")),
        Console.log(`*** runner-1 (pid ${victim.pid}) reports agents running: killed it with SIGKILL ***`)
      )
    )
  )
  yield* Console.log("running 12 agents (3 s each) on 3 runners of capacity 2...")
  const result = yield* Corral.run(agents, { runId: "demo", concurrency: 12, onEvent }).pipe(
    Effect.provide(Cluster.layerExecutor({ url }))
  )
  const succeeded = result.outcomes.filter((outcome) => outcome._tag === "Succeeded").length
  yield* Console.log(`${succeeded}/12 succeeded, one outcome each; the killed runner's agents ran again elsewhere`)
  yield* Console.log("stopping runners and Postgres, deleting temporary folders")
})

Effect.runPromise(Effect.scoped(program)).catch((error) => {
  console.error(error)
  process.exit(1)
})
