import * as RunLedger from "@corral/platform-node/RunLedger"
import * as RunLiveness from "@corral/platform-node/RunLiveness"
import { Workspace } from "@corral/platform-node/Workspace"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import { invalidInput } from "../CliExit.ts"
import * as Orphans from "../Orphans.ts"
import { ageIssue, parseAge } from "../internal/ageFlag.ts"
import { notARepository, resolve } from "../Paths.ts"

/**
 * Stops the agents of runs whose coordinator died, marking those runs crashed in the ledger; with
 * `dryRun`, only lists them (the runs recorded `running` whose lease says they are dead), changing
 * nothing. Returns the process groups stopped (or that would be).
 */
const reapCrashed = (repo: string, stateDir: string, dryRun: boolean) => {
  const file = NodePath.join(stateDir, "ledger.db")
  if (!NodeFs.existsSync(file)) return Effect.succeed<ReadonlyArray<number>>([])
  return Effect.gen(function* () {
    const ledger = yield* RunLedger.RunLedger
    const alive = yield* RunLiveness.leaseRule(repo)
    if (!dryRun) {
      return yield* Orphans.reap(
        stateDir,
        yield* ledger.markCrashed((pid, hostname, runId) => alive({ runId, pid, hostname }))
      )
    }
    const crashed = (yield* ledger.listRuns()).filter((run) => run.status === "running" && !alive(run))
    return Orphans.left(
      stateDir,
      crashed.map((run) => run.runId)
    )
  }).pipe(
    Effect.provide(RunLedger.layerSqlite(file)),
    Effect.orElseSucceed((): ReadonlyArray<number> => [])
  )
}

/**
 * When each run the ledger recorded ended, by run id (its last heartbeat while it has no end); none
 * when the state folder has no ledger or it cannot be read.
 */
const endTimes = (stateDir: string) => {
  const file = NodePath.join(stateDir, "ledger.db")
  if (!NodeFs.existsSync(file)) return Effect.succeed(new Map<string, number>())
  return Effect.gen(function* () {
    const runs = yield* (yield* RunLedger.RunLedger).listRuns()
    return new Map(runs.map((run) => [run.runId, run.endedAt ?? run.heartbeatAt]))
  }).pipe(
    Effect.provide(RunLedger.layerSqlite(file)),
    Effect.orElseSucceed(() => new Map<string, number>())
  )
}

/**
 * `corral gc`: removes what dead runs left behind.
 *
 * @since 0.1.0
 */
export const gc = Command.make(
  "gc",
  {
    olderThan: Flag.String("older-than").pipe(
      Flag.optional,
      Flag.withDescription("Only runs at least this old (e.g. 7d, 12h)")
    ),
    dryRun: Flag.Boolean("dry-run").pipe(Flag.withDefault(false), Flag.withDescription("List what would be removed")),
    repo: Flag.String("repo").pipe(
      Flag.optional,
      Flag.withDescription("The target repository (default: current directory)")
    ),
    stateDir: Flag.String("state-dir").pipe(
      Flag.optional,
      Flag.withDescription(
        "Where corral keeps its state (default: $CORRAL_HOME, else .corral at the top of the repository holding --repo)"
      )
    )
  },
  (flags) =>
    Effect.gen(function* () {
      const paths = yield* resolve(flags.repo, flags.stateDir)
      const olderThan = Option.isSome(flags.olderThan) ? parseAge(flags.olderThan.value) : undefined
      if (Option.isSome(flags.olderThan) && olderThan === undefined) {
        return yield* invalidInput(ageIssue(flags.olderThan.value))
      }
      const stopped = yield* reapCrashed(paths.repo, paths.stateDir, flags.dryRun)
      const stop = flags.dryRun ? "would stop" : "stopped"
      for (const pid of stopped) yield* Console.log(`${stop} process group ${pid} of a crashed run`)
      const workspace = yield* Workspace
      const report = yield* workspace
        .gc({
          repo: paths.repo,
          stateDir: paths.stateDir,
          dryRun: flags.dryRun,
          olderThan,
          endedAt: yield* endTimes(paths.stateDir)
        })
        .pipe(
          Effect.catchTag("NotAGitRepository", (error) =>
            invalidInput(
              notARepository(error.path, "run corral gc in the repository the runs used, or name it with --repo")
            )
          )
        )
      const verb = flags.dryRun ? "would remove" : "removed"
      for (const item of report.removed) yield* Console.log(`${verb} ${item.kind} ${item.target}`)
      for (const item of report.kept) yield* Console.log(`kept ${item.kind} ${item.target}: ${item.reason}`)
      yield* Console.log(`${report.removed.length} ${verb}, ${report.kept.length} kept`)
      if (report.kept.length > 0)
        yield* Console.log(
          "to remove a run's branches and worktrees anyway: corral discard <run-id> (or --all-merged, --older-than 7d); it asks first"
        )
    }).pipe(Effect.catchTag("GitNotFound", (error) => invalidInput(error.message)))
).pipe(
  Command.withDescription(
    "Remove worktrees, branches and folders left by runs that are no longer alive (never unmerged work)"
  ),
  Command.withExamples([
    { command: "corral gc --dry-run", description: "list leftovers" },
    { command: "corral gc --older-than 7d", description: "remove leftovers of runs older than a week" }
  ])
)
