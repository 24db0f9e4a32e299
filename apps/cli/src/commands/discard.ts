import * as Git from "@corral/platform-node/Git"
import * as RunLedger from "@corral/platform-node/RunLedger"
import type { RunRecord } from "@corral/platform-node/RunRecord"
import * as RunLiveness from "@corral/platform-node/RunLiveness"
import * as RunRegistry from "@corral/platform-node/RunRegistry"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Argument from "effect/cli/Argument"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as NodeReadline from "node:readline"
import { CliExit, invalidInput } from "../CliExit.ts"
import * as LedgerFile from "../LedgerFile.ts"
import { ageIssue, parseAge } from "../internal/ageFlag.ts"
import * as Orphans from "../Orphans.ts"
import * as OutputGuard from "../OutputGuard.ts"
import { type Paths, resolve } from "../Paths.ts"
import { count } from "../Plural.ts"

interface Removal {
  readonly runId: string
  readonly worktrees: ReadonlyArray<string>
  readonly branches: ReadonlyArray<string>
  readonly folders: ReadonlyArray<string>
}

const say = (text: string) => OutputGuard.write(process.stdout, `${text}\n`)

/** The worktrees git has registered for a run: on one of its branches or under its worktree folder. */
const worktreesOf = (repo: string, stateDir: string, runId: string) =>
  Git.run(["worktree", "list", "--porcelain"], { cwd: repo }).pipe(
    Effect.map((out) =>
      out.split("\n\n").flatMap((block) => {
        const fields = block.split("\n")
        const dir = fields.find((line) => line.startsWith("worktree "))?.slice("worktree ".length)
        const branch = fields.find((line) => line.startsWith("branch "))?.slice("branch refs/heads/".length)
        if (dir === undefined) return []
        const inFolder = dir.startsWith(`${NodePath.join(stateDir, "worktrees", runId)}${NodePath.sep}`)
        return inFolder || branch?.startsWith(`corral/${runId}/`) === true ? [dir] : []
      })
    )
  )

/**
 * The branches corral made for a run, when they exist: one per agent the ledger recorded, the
 * integration branch, and every `corral/<run-id>/…` branch the run registry recorded (written before
 * the branch, so one made just before a `kill -9` the ledger never heard of is there).
 */
const branchesOf = (repo: string, run: RunRecord) =>
  Effect.gen(function* () {
    const prefix = `corral/${run.runId}/`
    const recorded = (yield* RunRegistry.records(repo, run.runId)).branches.filter((branch) =>
      branch.startsWith(prefix)
    )
    const named = [...run.agents.map((agent) => agent.agentId), "integration"].map((name) => `${prefix}${name}`)
    return yield* Effect.filter([...new Set([...named, ...recorded])], (branch) =>
      Git.test(["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`], { cwd: repo })
    )
  })

const planRemoval = (paths: Paths, run: RunRecord) =>
  Effect.gen(function* () {
    const folders = [
      NodePath.join(paths.stateDir, "runs", run.runId),
      NodePath.join(paths.stateDir, "runs", `${run.runId}.json`),
      NodePath.join(paths.stateDir, "worktrees", run.runId),
      NodePath.join(paths.stateDir, "overlay", run.runId),
      NodePath.join(paths.stateDir, "agents", run.runId),
      ...(yield* RunRegistry.files(paths.repo, run.runId))
    ].filter((folder) => NodeFs.existsSync(folder))
    return {
      runId: run.runId,
      worktrees: yield* worktreesOf(paths.repo, paths.stateDir, run.runId),
      branches: yield* branchesOf(paths.repo, run),
      folders
    } satisfies Removal
  })

/**
 * Removes a run's worktrees, branches, folders and its records and lease in the run registry, after
 * stopping what is left of its agents (and their mounts).
 */
const remove = (paths: Paths, removal: Removal) =>
  Effect.gen(function* () {
    const repo = paths.repo
    for (const pid of yield* Orphans.reap(paths.stateDir, [removal.runId])) {
      say(`stopped process group ${pid} of run ${removal.runId}`)
    }
    for (const dir of removal.worktrees) {
      yield* Git.run(["worktree", "remove", "--force", "--force", dir], { cwd: repo })
      say(`removed worktree ${dir}`)
    }
    yield* Effect.ignore(Git.run(["worktree", "prune"], { cwd: repo }))
    for (const branch of removal.branches) {
      yield* Git.run(["branch", "-D", branch], { cwd: repo })
      say(`removed branch ${branch}`)
    }
    for (const folder of removal.folders) {
      NodeFs.rmSync(folder, { recursive: true, force: true })
      say(`removed ${folder}`)
    }
    yield* Effect.ignore(Effect.try(() => NodeFs.rmdirSync(NodePath.join(paths.stateDir, "overlay"))))
  })

/** The process that still runs a live run. */
interface Holder {
  readonly pid: number
  readonly hostname: string
}

/**
 * Whether a run is live, by the rule `corral gc` uses: its lease in the run registry (its process
 * on this host, else a heartbeat within 5 minutes). A run with no lease in this repository (one of
 * another repository sharing this state folder) is live while the ledger says it runs and its
 * process does (on another host it counts as live), as in `RunLiveness.layerLease`.
 */
const holderOf = (repo: string, run: RunLedger.RunSummary) =>
  Effect.map(RunRegistry.lease(repo, run.runId), (lease): Holder | undefined => {
    if (lease !== undefined) return lease.live ? lease : undefined
    return run.status === "running" && RunLiveness.pidAlive(run.pid, run.hostname) ? run : undefined
  })

const stillRunning = (runId: string, holder: Holder) =>
  `run ${runId} is still running (pid ${holder.pid} on ${holder.hostname})`

const howToStop = (holder: Holder) =>
  holder.hostname === NodeOs.hostname()
    ? `stop it first (Ctrl-C where it runs, or kill ${holder.pid}) or let it end, then discard it`
    : `stop it on ${holder.hostname} first or let it end, then discard it`

const confirm = (question: string): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const rl = NodeReadline.createInterface({ input: process.stdin, output: process.stderr })
    let answered = false
    rl.question(question, (answer) => {
      answered = true
      rl.close()
      resume(Effect.succeed(/^y(es)?$/i.test(answer.trim())))
    })
    rl.on("close", () => {
      if (!answered) resume(Effect.succeed(false))
    })
    return Effect.sync(() => rl.close())
  })

interface Flags {
  readonly runId: Option.Option<string>
  readonly allMerged: boolean
  readonly olderThan: Option.Option<string>
  readonly yes: boolean
  readonly repo: Option.Option<string>
  readonly stateDir: Option.Option<string>
}

const select = (ledger: RunLedger.Service, flags: Flags) =>
  Effect.gen(function* () {
    const runs = (yield* ledger.listRuns()).filter((run) => run.status !== "discarded")
    if (Option.isSome(flags.runId)) {
      const wanted = flags.runId.value
      const found = runs.find((run) => run.runId === wanted)
      if (found === undefined) return yield* invalidInput(`no such run ${JSON.stringify(wanted)} to discard`)
      return [found]
    }
    const age = Option.map(flags.olderThan, parseAge)
    if (Option.isSome(age) && age.value === undefined)
      return yield* invalidInput(ageIssue(Option.getOrElse(flags.olderThan, () => "")))
    const cutoff = Option.isSome(age) && age.value !== undefined ? Date.now() - Duration.toMillis(age.value) : undefined
    if (!flags.allMerged && cutoff === undefined)
      return yield* invalidInput("give a run id, --all-merged or --older-than AGE (corral runs lists the runs)")
    return runs.filter(
      (run) =>
        (!flags.allMerged || run.status === "succeeded") &&
        (cutoff === undefined || (run.endedAt ?? run.startedAt) < cutoff)
    )
  })

const execute = (flags: Flags) =>
  Effect.gen(function* () {
    const paths = yield* resolve(flags.repo, flags.stateDir)
    const file = NodePath.join(paths.stateDir, "ledger.db")
    if (!NodeFs.existsSync(file)) return yield* invalidInput(`no runs recorded in ${paths.stateDir}`)
    return yield* discardRuns(flags, paths).pipe(
      Effect.provide(RunLedger.layerSqlite(file)),
      Effect.catchTag("RunLedgerError", (error) => invalidInput(LedgerFile.unreadable(file, error))),
      Effect.catchTags({
        GitError: (error) => invalidInput(`git failed: ${error.message}`),
        GitNotFound: (error) => invalidInput(error.message),
        DiskFull: (error) => invalidInput(error.message),
        WorkspaceIoError: (error) => invalidInput(error.message)
      })
    )
  })

const discardRuns = (flags: Flags, paths: Paths) =>
  Effect.gen(function* () {
    const ledger = yield* RunLedger.RunLedger
    const chosen = yield* select(ledger, flags)
    const removals: Array<Removal> = []
    for (const summary of chosen) {
      const holder = yield* holderOf(paths.repo, summary)
      if (holder !== undefined && Option.isSome(flags.runId))
        return yield* invalidInput(`${stillRunning(summary.runId, holder)}: nothing removed; ${howToStop(holder)}`)
      if (holder !== undefined) {
        say(`skipped ${stillRunning(summary.runId, holder)}`)
        continue
      }
      const run = yield* ledger.getRun(summary.runId)
      if (Option.isSome(run)) removals.push(yield* planRemoval(paths, run.value))
    }
    if (removals.length === 0) return say("nothing to discard")
    for (const removal of removals) {
      say(`run ${removal.runId}:`)
      for (const item of [
        ...removal.branches.map((b) => `branch ${b}`),
        ...removal.worktrees.map((w) => `worktree ${w}`),
        ...removal.folders
      ])
        say(`  ${item}`)
    }
    if (
      !flags.yes &&
      !(yield* confirm(
        `discard ${removals.length === 1 ? "this run and its" : `these ${removals.length} runs and their`} unmerged work? [y/N] `
      ))
    ) {
      say("nothing removed")
      return yield* new CliExit({ code: 1 })
    }
    for (const removal of removals) {
      yield* ledger.forgetSuccesses(removal.runId)
      yield* remove(paths, removal)
      const endedAt = chosen.find((run) => run.runId === removal.runId)?.endedAt ?? Date.now()
      yield* ledger.finishRun(removal.runId, "discarded", endedAt)
    }
    say(`discarded ${count(removals.length, "run")}`)
  })

/**
 * `corral discard`.
 *
 * @since 0.1.0
 */
export const discard = Command.make(
  "discard",
  {
    runId: Argument.String("run-id").pipe(Argument.optional),
    allMerged: Flag.Boolean("all-merged").pipe(
      Flag.withDefault(false),
      Flag.withDescription("Every run that succeeded (all its agents' work merged into its integration branch)")
    ),
    olderThan: Flag.String("older-than").pipe(
      Flag.optional,
      Flag.withDescription("Every run that ended at least this long ago (12h, 7d)")
    ),
    yes: Flag.Boolean("yes").pipe(
      Flag.withAlias("y"),
      Flag.withDefault(false),
      Flag.withDescription("Do not ask for confirmation")
    ),
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
  execute
).pipe(
  Command.withDescription(
    "Remove a run's branches, worktrees and folders, including work never merged into your branches (asks first)"
  ),
  Command.withExamples([
    { command: "corral discard 20261125-231816-k3f9", description: "one run, after confirmation" },
    { command: "corral discard --all-merged --yes", description: "every run that succeeded, without asking" },
    { command: "corral discard --older-than 7d", description: "every run that ended more than a week ago" }
  ])
)
