/**
 * Runs a plan: every agent's command in its own workspace, under the plan's concurrency, claims,
 * dependencies and limits (rate limits are shared with other runs through `<stateDir>/locks.db`); each successful agent's work is committed and merged into the run's
 * integration branch, one merge at a time, while its claims are still held. The concurrency slot
 * goes to the next agent as soon as the command ends (`Corral.releaseSlot`): the commit and merge
 * run outside the `concurrency` bound, and a retry takes a slot again.
 *
 * @since 0.1.0
 */
import * as Agent from "@corral/core/Agent"
import * as Corral from "@corral/core/Corral"
import * as RateLimiter from "@corral/core/RateLimiter"
import type * as RunResult from "@corral/core/RunResult"
import * as CodingAgent from "@corral/platform-node/CodingAgent"
import * as ProcessRunner from "@corral/platform-node/ProcessRunner"
import * as SqliteRateLimiter from "@corral/platform-node/SqliteRateLimiter"
import { Workspace } from "@corral/platform-node/Workspace"
import * as WorkspaceModule from "@corral/platform-node/Workspace"
import type * as RunLedger from "@corral/platform-node/RunLedger"
import * as RunLedgerModule from "@corral/platform-node/RunLedger"
import * as Git from "@corral/platform-node/Git"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import type { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as NodePath from "node:path"
import * as AgentDatabase from "./AgentDatabase.ts"
import * as AgentIsolation from "./AgentIsolation.ts"
import * as AttemptLogs from "./AttemptLogs.ts"
import * as CachedWork from "./CachedWork.ts"
import * as KillPoint from "./internal/killPoint.ts"
import * as Orphans from "./Orphans.ts"
import * as OutcomeText from "./OutcomeText.ts"
import type { Plan, PlanAgent } from "./PlanFile.ts"
import type { RunEvent } from "./RunEvent.ts"

/**
 * The agent's work could not be merged: `paths` conflict with what is already on the integration
 * branch. The agent's branch is kept for review.
 *
 * @since 0.1.0
 * @category errors
 */
export class MergeConflict extends Data.TaggedError("MergeConflict")<{
  readonly agentId: string
  readonly branch: string
  readonly paths: ReadonlyArray<string>
}> {
  override get message() {
    return `merge conflict in ${this.paths.join(", ")}; branch ${this.branch} kept for review`
  }
}

/**
 * What a successful agent produced.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentResult {
  readonly process: ProcessRunner.ProcessResult
  readonly merge: "merged" | "nothing to merge" | "not merged"
  readonly commit: string | undefined
}

/**
 * The recorded success of an agent whose work a crashed run merged before the ledger recorded it
 * (see `Reconcile`): a resumed run reports it `Cached` and does not run it again.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReconciledResult {
  readonly merge: "merged"
  readonly commit: string
  /** The run whose integration branch holds the agent's commit. */
  readonly mergedBy: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly plan: Plan
  readonly repo: string
  readonly stateDir: string
  readonly runId: string
  readonly concurrency?: number | undefined
  readonly mode?: "settle" | "fail-fast" | undefined
  readonly isolation?: WorkspaceModule.Strategy | undefined
  readonly merge?: "auto" | "none" | undefined
  readonly keepWorkspaces?: boolean | undefined
  readonly onEvent: (event: RunEvent) => void
  readonly stopOn?: Effect.Effect<string> | undefined
  /** Records the run; with it, successes are cached by idempotency key. */
  readonly ledger?: RunLedger.Service | undefined
  /** Caching scope for agents without `inputs`: a resumed run reuses its original run's lineage. */
  readonly lineage?: string | undefined
  /** Start the integration branch from this commit or branch (a resumed run's integration head). */
  readonly base?: string | undefined
  /** Content hashes of each agent's declared `inputs` at the base commit. */
  readonly inputsHash?: Readonly<Record<string, string>> | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly runId: string
  readonly result: RunResult.RunResult<AgentResult, unknown>
  readonly integrationBranch: string | undefined
  /** The commit the integration branch started from; work was merged when the head differs. */
  readonly integrationBase: string | undefined
  readonly integrationHead: string | undefined
  /**
   * What a resumed run's integration branch started from (the resumed run's branch), whose work it
   * holds whether or not this run merges more; `undefined` when it started from `HEAD`.
   */
  readonly integrationFrom: string | undefined
  readonly logDir: string
  readonly keptWorkspaces: ReadonlyArray<WorkspaceModule.ReleaseReport>
  /**
   * git commands and their process time, per agent (set-up, commit, merge and release), and under
   * {@link runTallyKey} those of the run itself (integration branch, removing the worktree pool and
   * deleting merged branches at the end).
   */
  readonly git: Readonly<Record<string, Git.Tally>>
  /** Where each agent's slot time went (its last attempt), for `--verbose` and the benchmarks. */
  readonly phases: Readonly<Record<string, Phases>>
}

/**
 * Wall time (ms) of an agent's phases: its workspace's set-up (waiting for a pooled worktree
 * included), its command, the commit of its work, and its landing (conflict prediction and merge);
 * `slotMs` is how long it held its concurrency slot (set-up and command: commit and merge run after
 * the slot went to the next agent). Phases it did not reach are absent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Phases {
  setUpMs?: number
  commandMs?: number
  commitMs?: number
  mergeMs?: number
  slotMs?: number
}

/** Workspaces released at once in the background, off the agents' concurrency slots. */
const RELEASE_CONCURRENCY = 2

interface Context {
  readonly options: Options
  readonly workspace: Workspace["Service"]
  readonly integration: WorkspaceModule.Integration | undefined
  readonly isolation: WorkspaceModule.Strategy
  readonly logDir: string
  /** Work committed and not merged yet: what merge-time conflict predictions compare against. */
  readonly committed: Map<WorkspaceModule.WorkspaceHandle, WorkspaceModule.CommittedWork>
  readonly kept: Array<WorkspaceModule.ReleaseReport>
  /** Workspace warnings already shown: each once per run, not once per agent. */
  readonly warned: Set<string>
  readonly tallies: Map<string, Git.Tally>
  readonly phases: Map<string, Phases>
  /** The run's scope: workspaces are released in it, after the agent's slot is free. */
  readonly scope: Scope.Scope
  readonly releases: Semaphore.Semaphore
  readonly pending: Set<Fiber.Fiber<void>>
  /** The release under way per agent: a retry waits for it (it deletes the branch the retry re-creates). */
  readonly releasing: Map<string, Fiber.Fiber<void>>
  /** The folder (and branch) name of each agent's last workspace, when not its id ({@link workspaceFolder}). */
  readonly folders: Map<string, string>
  /**
   * The agents that have had a workspace or finished without one (cached, skipped, cancelled); once
   * all have, the run's worktree pool is closed.
   */
  readonly settled: Set<string>
  readonly runTally: Git.Tally
}

/**
 * Runs the plan. Fails with a workspace error before anything starts when the repository is not
 * usable (for example not a git repository with `isolation: worktree`). When it returns, every
 * workspace has been released (removed, or kept and listed in the report) and the run's lease is gone.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (
  options: Options
): Effect.Effect<
  Report,
  | WorkspaceModule.WorkspaceError
  | import("@corral/core").CorralError.InvalidRun
  | RunLedger.RunLedgerError
  | SqliteRateLimiter.LimiterError,
  Workspace | ChildProcessSpawner | Scope.Scope
> => {
  const tally = Git.makeTally()
  return Effect.scoped(runScoped(options, tally)).pipe(Effect.provideService(Git.CurrentTally, tally))
}

/**
 * The key of the run's own git commands in {@link Report.git} (agent ids cannot contain parentheses).
 *
 * @since 0.1.0
 * @category models
 */
export const runTallyKey = "(run)"

const runScoped = (options: Options, runTally: Git.Tally) =>
  Effect.gen(function* () {
    const workspace = yield* Workspace
    const isolation = options.isolation ?? options.plan.isolation
    const merge = options.merge ?? options.plan.merge
    yield* workspace.registerRun(options.repo, options.runId)
    const integration =
      isolation === "worktree" && merge === "auto"
        ? yield* workspace.integration({
            repo: options.repo,
            runId: options.runId,
            base: options.base,
            history: options.plan.history,
            author: options.plan.author,
            committer: options.plan.committer
          })
        : undefined
    // A resumed run's branch starts from the old run's integration head and holds the lineage's work
    // even when the resume merges nothing new: only a branch started from `HEAD` is dropped.
    const droppable = options.base === undefined ? integration : undefined
    if (droppable !== undefined) yield* Effect.addFinalizer(dropOnFailure(droppable))
    const ctx: Context = {
      options,
      workspace,
      integration,
      isolation,
      logDir: NodePath.join(options.stateDir, "runs", options.runId, "logs"),
      committed: new Map(),
      kept: [],
      warned: new Set(),
      tallies: new Map(),
      phases: new Map(),
      scope: yield* Effect.scope,
      releases: yield* Semaphore.make(RELEASE_CONCURRENCY),
      pending: new Set(),
      releasing: new Map(),
      folders: new Map(),
      settled: new Set(),
      runTally
    }
    const agents = options.plan.agents.map((agent) => toAgent(ctx, agent))
    if (options.ledger !== undefined) yield* startRecord(options, options.ledger, agents)
    const ledger = options.ledger
    const buckets = rateLimitsOf(options.plan)
    const limiter =
      buckets === undefined
        ? undefined
        : yield* SqliteRateLimiter.scoped(NodePath.join(options.stateDir, "locks.db"), buckets)
    const result = yield* Corral.run(agents, {
      runId: options.runId,
      concurrency: options.concurrency ?? options.plan.concurrency,
      mode: options.mode ?? options.plan.mode,
      pools: options.plan.pools,
      budget: budgetOf(options.plan),
      onEvent: (event) => {
        const emit = Effect.sync(() => {
          logTrailer(ctx.logDir, event)
          options.onEvent(event)
        })
        const recorded = ledger === undefined ? emit : Effect.andThen(emit, recordEvent(ctx, event))
        return event._tag === "Finished" ? Effect.andThen(recorded, closePoolOnceSettled(ctx, event.agentId)) : recorded
      },
      stopOn: options.stopOn
    }).pipe(
      limiter === undefined ? (effect) => effect : Effect.provideService(RateLimiter.RateLimiter, limiter),
      ledger === undefined
        ? (effect) => effect
        : (effect) =>
            effect.pipe(
              Effect.provide(
                CachedWork.layer(
                  options.repo,
                  integration?.baseCommit,
                  agents.flatMap((agent) => (agent.idempotencyKey === undefined ? [] : [agent.idempotencyKey]))
                )
              ),
              Effect.provideService(RunLedgerModule.RunLedger, ledger)
            )
    )
    yield* Fiber.awaitAll([...ctx.pending])
    if (droppable !== undefined) yield* droppable.dropIfEmpty()
    return {
      runId: options.runId,
      result,
      integrationBranch: integration?.branch,
      integrationBase: integration?.baseCommit,
      integrationHead: integration === undefined ? undefined : yield* integration.head(),
      integrationFrom: integration === undefined ? undefined : options.base,
      logDir: ctx.logDir,
      keptWorkspaces: ctx.kept,
      git: { ...Object.fromEntries(ctx.tallies), [runTallyKey]: runTally },
      phases: Object.fromEntries(ctx.phases)
    }
  })

/**
 * A run that fails or is interrupted after creating its integration branch (a rate limiter that
 * cannot open, the ledger, a defect) drops it as its end does when nothing was merged; only a
 * crash, which runs no finalizer, leaves it for `--resume`. A finalizer, local and cluster runs.
 *
 * @since 0.1.0
 * @category workspaces
 */
export const dropOnFailure =
  (integration: WorkspaceModule.Integration) =>
  (exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
    exit._tag === "Failure" ? Effect.ignore(integration.dropIfEmpty()) : Effect.void

/**
 * Ends an agent's log with why corral stopped it (`[corral] timed out after 3.0s`): the process
 * runner's own trailer is written only when the process ends by itself.
 */
const logTrailer = (logDir: string, event: RunEvent): void => {
  if (event._tag !== "Finished" || event.outcome.startedAt === null) return
  const outcome = event.outcome
  if (outcome._tag !== "TimedOut" && outcome._tag !== "Interrupted") return
  const file = NodePath.join(logDir, `${outcome.agentId}.log`)
  try {
    if (NodeFs.existsSync(file)) NodeFs.appendFileSync(file, `[corral] ${OutcomeText.describe(outcome)}\n`)
  } catch {
    // the log is best effort; the outcome itself is recorded in the ledger
  }
}

const toAgent = (ctx: Context, agent: PlanAgent) => {
  const pools = { ...agent.claims.pools }
  if (agent.limits.memoryMb !== undefined && ctx.options.plan.pools.memoryMb !== undefined)
    pools.memoryMb = agent.limits.memoryMb
  return Agent.make(agent.id, {
    run: (deps: Readonly<Record<string, unknown>>) => inWorkspaceScope(ctx, agent, deps),
    idempotencyKey: ctx.options.ledger === undefined ? undefined : idempotencyKeyOf(ctx.options, agent),
    timeout: agent.timeoutMs,
    retry:
      agent.retries > 0
        ? Schedule.recurs(agent.retries).pipe(Schedule.while((meta) => !(meta.input instanceof MergeConflict)))
        : undefined,
    claims: { read: agent.claims.read, write: agent.claims.write, pools },
    claimTimeout: agent.claimTimeoutMs,
    dependsOn: agent.dependsOn,
    estimate: agent.estimateMs,
    rateLimit: agent.rateLimit,
    labels: agent.labels
  })
}

/**
 * The plan's rate-limit buckets in the form `Corral.run` takes, or `undefined` when it has none.
 *
 * @since 0.1.0
 * @category running
 */
export const rateLimitsOf = (
  plan: Plan
): Record<string, { limit: number; interval: number; burst?: number }> | undefined => {
  const entries = Object.entries(plan.rateLimits)
  if (entries.length === 0) return undefined
  return Object.fromEntries(
    entries.map(([name, bucket]) => [
      name,
      bucket.burst === undefined
        ? { limit: bucket.limit, interval: bucket.intervalMs }
        : { limit: bucket.limit, interval: bucket.intervalMs, burst: bucket.burst }
    ])
  )
}

/**
 * The plan's `budget` in the form `Corral.run` takes, or `undefined` when it sets none.
 *
 * @since 0.1.0
 * @category running
 */
export const budgetOf = (plan: Plan): { costUsd?: number; tokens?: number } | undefined => {
  const budget: { costUsd?: number; tokens?: number } = {}
  if (plan.budget.costUsd !== undefined) budget.costUsd = plan.budget.costUsd
  if (plan.budget.tokens !== undefined) budget.tokens = plan.budget.tokens
  return Object.keys(budget).length === 0 ? undefined : budget
}

/**
 * The plan's agents as core agents that do nothing, for analysis (`corral validate`).
 *
 * @since 0.1.0
 * @category analysis
 */
export const shapeOf = (plan: Plan) =>
  plan.agents.map((agent) =>
    Agent.make(agent.id, {
      run: Effect.void,
      claims: { read: agent.claims.read, write: agent.claims.write, pools: agent.claims.pools },
      dependsOn: agent.dependsOn,
      estimate: agent.estimateMs,
      rateLimit: agent.rateLimit
    })
  )

/**
 * The key under which an agent's success is cached: its definition's hash, plus the hash of its
 * declared inputs at the base commit when it has any (then a later run with unchanged inputs reuses
 * it), else the run's lineage (so only a resumed run reuses it).
 *
 * @since 0.1.0
 * @category caching
 */
export const idempotencyKeyOf = (
  options: Pick<Options, "inputsHash" | "lineage" | "runId">,
  agent: PlanAgent
): string =>
  agent.inputs.length > 0
    ? `${agent.hash}:inputs:${options.inputsHash?.[agent.id] ?? ""}`
    : `${agent.hash}:run:${options.lineage ?? options.runId}`

const startRecord = (options: Options, ledger: RunLedger.Service, agents: ReadonlyArray<Agent.Any>) =>
  ledger.startRun({
    runId: options.runId,
    planFile: NodePath.resolve(options.plan.file),
    planHash: options.plan.hash,
    options: {
      lineage: options.lineage ?? options.runId,
      base: options.base ?? null,
      isolation: options.isolation ?? null
    },
    pid: process.pid,
    hostname: NodeOs.hostname(),
    startedAt: Date.now(),
    agents: agents.map((agent) => ({
      agentId: agent.id,
      dependsOn: agent.dependsOn,
      idempotencyKey: agent.idempotencyKey ?? null
    }))
  })

const tallyOf = (ctx: Context, agentId: string) => {
  const existing = ctx.tallies.get(agentId)
  if (existing !== undefined) return existing
  const created = Git.makeTally()
  ctx.tallies.set(agentId, created)
  return created
}

/**
 * Runs the agent with its workspace in a scope of its own, and closes that scope (removing the
 * worktree) in the background once the agent's work is committed and merged, so the agent's slot is
 * free at once. At most {@link RELEASE_CONCURRENCY} releases run at a time; `run` waits for all of
 * them, and the run's scope closing (Ctrl-C, failure) finishes any still queued.
 */
const inWorkspaceScope = (ctx: Context, agent: PlanAgent, deps: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const previous = ctx.releasing.get(agent.id)
    if (previous !== undefined) yield* Fiber.await(previous)
    const scope = yield* Scope.fork(ctx.scope)
    const tally = tallyOf(ctx, agent.id)
    return yield* runAgent(ctx, agent, deps).pipe(
      Scope.provide(scope),
      Effect.onExit((exit) => releaseLater(ctx, agent.id, scope, exit, tally)),
      Effect.provideService(Git.CurrentTally, tally)
    )
  })

const releaseLater = (
  ctx: Context,
  agentId: string,
  scope: Scope.Closeable,
  exit: Exit.Exit<unknown, unknown>,
  tally: Git.Tally
) =>
  Effect.gen(function* () {
    const release = Scope.close(scope, exit).pipe(
      ctx.releases.withPermit,
      Effect.provideService(Git.CurrentTally, tally),
      Effect.uninterruptible
    )
    const fiber = yield* Effect.forkIn(release, ctx.scope)
    ctx.pending.add(fiber)
    ctx.releasing.set(agentId, fiber)
    fiber.addObserver(() => {
      ctx.pending.delete(fiber)
      if (ctx.releasing.get(agentId) === fiber) ctx.releasing.delete(agentId)
    })
  })

/**
 * Once every agent of the plan has had its workspace or finished without one (a cached success, a
 * skipped or cancelled agent), none will take a pooled worktree any more (a retried one adds its
 * own): the run closes its pool (`Workspace.closePool`), whose free worktrees are then removed while
 * the last agents run rather than after the run's last event. In the background, awaited by `run`
 * like a release; its git commands count as the run's own.
 */
const closePoolOnceSettled = (ctx: Context, agentId: string) =>
  Effect.suspend(() => {
    const before = ctx.settled.size
    ctx.settled.add(agentId)
    const all = ctx.options.plan.agents.length
    if (ctx.isolation !== "worktree" || before === all || ctx.settled.size < all) return Effect.void
    const close = ctx.workspace
      .closePool(ctx.options.runId)
      .pipe(Effect.provideService(Git.CurrentTally, ctx.runTally), Effect.uninterruptible)
    return Effect.flatMap(Effect.forkIn(close, ctx.scope), (fiber) =>
      Effect.sync(() => {
        ctx.pending.add(fiber)
        fiber.addObserver(() => ctx.pending.delete(fiber))
      })
    )
  })

/**
 * Where an agent's `CORRAL_*` files live: `io/` beside its private data folder (removed with it), so
 * a sandbox that hides the state folder still shows the agent only its own folders.
 */
const protocolDirOf = (options: Options, agent: PlanAgent, handle: WorkspaceModule.WorkspaceHandle): string => {
  const dataDir = handle.env.CORRAL_AGENT_DIR
  return dataDir === undefined
    ? NodePath.resolve(options.stateDir, "agents", options.runId, agent.id, "io")
    : NodePath.join(NodePath.dirname(NodePath.resolve(dataDir)), "io")
}

/** A coding agent's sandbox also reads the launcher and the Node binary that runs it. */
const sandboxOf = (agent: PlanAgent, sandbox: ProcessRunner.SandboxOptions): ProcessRunner.SandboxOptions =>
  agent.use === undefined
    ? sandbox
    : {
        ...sandbox,
        allow: { ...sandbox.allow, read: [...(sandbox.allow?.read ?? []), ...CodingAgent.launcherReadPaths()] }
      }

const writePrompt = (dir: string, prompt: string) =>
  Effect.sync(() => {
    const file = NodePath.join(dir, "prompt.md")
    NodeFs.mkdirSync(dir, { recursive: true })
    NodeFs.writeFileSync(file, prompt)
    return file
  })

const resultsOf = (deps: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const results: Record<string, unknown> = {}
  for (const [id, value] of Object.entries(deps)) {
    const result = (value as Partial<AgentResult> | undefined)?.process?.result
    if (result !== undefined) results[id] = result
  }
  return results
}

/** Measures `effect`'s wall time into the agent's `phase`. */
const timed =
  (ctx: Context, agentId: string, phase: keyof Phases) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const started = performance.now()
      return Effect.tap(effect, () =>
        Effect.sync(() => {
          const phases = ctx.phases.get(agentId) ?? {}
          phases[phase] = performance.now() - started
          ctx.phases.set(agentId, phases)
        })
      )
    })

const runAgent = (ctx: Context, agent: PlanAgent, deps: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    ctx.phases.delete(agent.id)
    const started = performance.now()
    const { options } = ctx
    const base = ctx.integration === undefined ? undefined : yield* ctx.integration.head()
    const me = yield* Agent.current
    const attempt = me?.attempt ?? 1
    if (attempt > 1) AttemptLogs.keep(ctx.logDir, agent.id, attempt - 1)
    const postgres = postgresOf(agent, options.runId, attempt)
    const folder = workspaceFolder(ctx, agent.id, attempt)
    const handle = yield* ctx.workspace
      .acquire({
        repo: options.repo,
        runId: options.runId,
        agentId: agent.id,
        ...(folder === agent.id ? {} : { folder }),
        strategy: ctx.isolation,
        base,
        stateDir: options.stateDir,
        sparse: agent.sparse ? sparseFolders(agent) : undefined,
        ...(agent.overlay ? { overlay: true } : {}),
        keep: options.keepWorkspaces,
        recycle: true,
        onRelease: (report) =>
          Effect.andThen(
            Effect.sync(() => onRelease(ctx, report)),
            postgres === undefined || report.workspace === "kept"
              ? Effect.void
              : Effect.ignore(AgentDatabase.drop(postgres.url, postgres.schema))
          )
      })
      .pipe(timed(ctx, agent.id, "setUpMs"))
    yield* recordEvent(ctx, { _tag: attemptWorkspaceTag, at: Date.now(), agentId: agent.id, attempt, dir: handle.dir })
    yield* closePoolOnceSettled(ctx, agent.id)
    if (postgres !== undefined) yield* AgentDatabase.create(postgres.url, postgres.schema)
    return yield* inWorkspace(ctx, agent, handle, me, postgres, deps, started).pipe(
      Effect.ensuring(Effect.sync(() => ctx.committed.delete(handle)))
    )
  })

/** The ledger event that records an attempt's workspace folder (`RunRecord.AgentRecord.workspaces`). */
const attemptWorkspaceTag = "AttemptWorkspace"

/**
 * The folder and branch name of an attempt's workspace: the agent's id, until an attempt's workspace
 * is kept (its changes stay for review, its folder and branch with them); the attempts after it take
 * `<id>-attempt-<n>`, the id cut so that the name has at most 64 characters, or `<id>-attempt-<n>.<k>`
 * (k = 2, 3, …) while that name is another agent's id or the folder of another workspace of the run.
 */
const workspaceFolder = (ctx: Context, agentId: string, attempt: number): string => {
  const previous = ctx.folders.get(agentId) ?? agentId
  const kept = ctx.kept.some((report) => report.agentId === agentId && NodePath.basename(report.dir) === previous)
  if (!kept) return previous
  for (let k = 1; ; k++) {
    const suffix = k === 1 ? `-attempt-${attempt}` : `-attempt-${attempt}.${k}`
    const folder = `${agentId.slice(0, 64 - suffix.length)}${suffix}`
    if (folderTaken(ctx, agentId, folder)) continue
    ctx.folders.set(agentId, folder)
    return folder
  }
}

/** Whether `folder` is another agent's id, the last folder of another agent, or a kept workspace's folder. */
const folderTaken = (ctx: Context, agentId: string, folder: string): boolean => {
  if (ctx.options.plan.agents.some((agent) => agent.id === folder)) return true
  for (const [other, name] of ctx.folders) if (other !== agentId && name === folder) return true
  return ctx.kept.some((report) => NodePath.basename(report.dir) === folder)
}

const inWorkspace = (
  ctx: Context,
  agent: PlanAgent,
  handle: WorkspaceModule.WorkspaceHandle,
  me: Agent.Current | undefined,
  postgres: ReturnType<typeof postgresOf>,
  deps: Readonly<Record<string, unknown>>,
  started: number
) =>
  Effect.gen(function* () {
    const { options } = ctx
    for (const warning of handle.warnings) {
      if (ctx.warned.has(warning)) continue
      ctx.warned.add(warning)
      options.onEvent({ _tag: "Notice", at: Date.now(), message: `warning: ${warning}` })
    }
    const fencing = me?.fencingToken === undefined ? {} : { CORRAL_FENCING_TOKEN: String(me.fencingToken) }
    const protocolDir = protocolDirOf(options, agent, handle)
    const prompt =
      agent.prompt === undefined ? {} : { CORRAL_PROMPT_FILE: yield* writePrompt(protocolDir, agent.prompt) }
    const isolated = AgentIsolation.of(agent, handle, options)
    const gitLink = isolated.sandbox === undefined ? undefined : AgentIsolation.guardGitLink(handle.dir)
    const process = yield* ProcessRunner.run({
      name: agent.id,
      command: inView(
        handle,
        agent.use === undefined
          ? agent.run
          : CodingAgent.commandLine({ kind: agent.use, model: agent.model, args: agent.args })
      ),
      shell: true,
      cwd: handle.dir,
      env: {
        ...passed(agent),
        ...handle.env,
        ...isolated.env,
        ...(postgres === undefined ? {} : AgentDatabase.agentEnv(postgres.url, postgres.schema)),
        ...agent.env,
        ...fencing,
        ...prompt,
        CORRAL_RUN_ID: options.runId,
        CORRAL_AGENT_ID: agent.id
      },
      secrets: agent.secrets,
      inheritEnv: agent.inheritEnv,
      logDir: ctx.logDir,
      protocolDir,
      ...(agent.dependsOn.length === 0 ? {} : { deps: resultsOf(deps) }),
      onWarning: (message) => options.onEvent({ _tag: "Notice", at: Date.now(), message }),
      onUsage: (usage) => options.onEvent({ _tag: "Usage", at: Date.now(), agentId: agent.id, usage }),
      privateDirs: isolated.privateDirs,
      ...(isolated.sandbox === undefined ? {} : { sandbox: sandboxOf(agent, isolated.sandbox) }),
      limits: limitsOf(agent),
      onLine: (line) => options.onEvent({ _tag: "Output", at: Date.now(), agentId: agent.id, ...line }),
      onProcess: (pid) => Orphans.track(options.stateDir, options.runId, agent.id, pid)
    }).pipe(Effect.ensuring(gitLink?.restore ?? Effect.void), timed(ctx, agent.id, "commandMs"))
    if (gitLink?.tampered()) {
      return yield* new AgentIsolation.GitLinkTampered({ agentId: agent.id, path: gitLink.file })
    }
    const releaseSlot = Effect.map(Corral.releaseSlot, (freed) => {
      if (freed) released(ctx, agent.id, started)
    })
    return yield* mergeBack(ctx, agent, handle, process, releaseSlot)
  })

const shellQuote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`

/** An overlay workspace's command runs inside its mount (`Workspace.overlayPrefix`); any other as it is. */
const inView = (handle: WorkspaceModule.WorkspaceHandle, command: string): string => {
  const prefix = WorkspaceModule.overlayPrefix(handle)
  return prefix === undefined ? command : [...prefix, "sh", "-c", command].map(shellQuote).join(" ")
}

/** Records that the agent gave its slot back (its `slotMs`, a `SlotReleased` event). */
const released = (ctx: Context, agentId: string, started: number): void => {
  const phases = ctx.phases.get(agentId) ?? {}
  phases.slotMs = performance.now() - started
  ctx.phases.set(agentId, phases)
  ctx.options.onEvent({ _tag: "SlotReleased", at: Date.now(), agentId })
}

/**
 * The folders a sparse workspace checks out: the fixed prefix of each claimed path's folder (up to its
 * first glob) and of each input pattern's; named resources (`db:users`) take none.
 *
 * @since 0.1.0
 * @category workspaces
 */
export const sparseFolders = (agent: PlanAgent): ReadonlyArray<string> | undefined => {
  const folders = new Set<string>()
  const addPrefix = (pattern: string) => {
    const parts = pattern.split("/")
    const prefix: Array<string> = []
    for (let i = 0; i < parts.length - 1 && !/[*?[\]{\\]/.test(parts[i]!); i++) prefix.push(parts[i]!)
    const folder = prefix.filter((part) => part !== "" && part !== ".").join("/")
    if (folder !== "") folders.add(folder)
  }
  for (const key of [...agent.claims.read, ...agent.claims.write]) {
    if (!/^[A-Za-z][A-Za-z0-9+._-]*:/.test(key)) addPrefix(key)
  }
  for (const pattern of agent.inputs) addPrefix(pattern)
  return folders.size === 0 ? undefined : [...folders]
}

/** The agent's Postgres schema with `database: per-agent` and `CORRAL_POSTGRES_URL` set (one per attempt). */
const postgresOf = (agent: PlanAgent, runId: string, attempt: number) => {
  const url = process.env[AgentDatabase.urlVariable]
  if (agent.database !== "per-agent" || url === undefined || url === "") return undefined
  const name = attempt > 1 ? `${agent.id}_${attempt}` : agent.id
  return { url, schema: AgentDatabase.schemaName(runId, name) }
}

const passed = (agent: PlanAgent): Record<string, string> =>
  Object.fromEntries(
    agent.passEnv.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]]))
  )

/**
 * The output cap of a plan's agent that sets no `limits.maxOutputBytes`: 64 MiB of stdout + stderr.
 *
 * @since 0.1.0
 * @category limits
 */
export const defaultMaxOutputBytes = 64 * 1024 * 1024

/**
 * The result file cap of a plan's agent that sets no `limits.maxResultBytes`: 8 MiB. A result is kept
 * in the ledger and passed to dependent agents.
 *
 * @since 0.1.0
 * @category limits
 */
export const defaultMaxResultBytes = 8 * 1024 * 1024

/**
 * The usage file cap of a plan's agent that sets no `limits.maxUsageBytes`: 8 MiB, some 100,000
 * usage lines.
 *
 * @since 0.1.0
 * @category limits
 */
export const defaultMaxUsageBytes = 8 * 1024 * 1024

/**
 * The process limits of a plan's agent: those it sets, {@link defaultMaxOutputBytes},
 * {@link defaultMaxResultBytes} and {@link defaultMaxUsageBytes}.
 *
 * @since 0.1.0
 * @category limits
 */
export const limitsOf = (agent: PlanAgent): ProcessRunner.ProcessLimits => ({
  ...Object.fromEntries(Object.entries(agent.limits).filter(([, value]) => value !== undefined)),
  maxOutputBytes: agent.limits.maxOutputBytes ?? defaultMaxOutputBytes,
  maxResultBytes: agent.limits.maxResultBytes ?? defaultMaxResultBytes,
  maxUsageBytes: agent.limits.maxUsageBytes ?? defaultMaxUsageBytes
})

/**
 * Records `event` in the run's ledger. A failure does not stop the run; the first one is told once,
 * as a `Notice`: the agents go on, and the ledger misses what follows.
 */
const recordEvent = (ctx: Context, event: RunEvent | RunLedger.OtherEvent) => {
  const ledger = ctx.options.ledger
  if (ledger === undefined) return Effect.void
  return ledger.record(ctx.options.runId, event as RunLedger.LedgerEvent).pipe(
    Effect.catch((error) =>
      Effect.sync(() => {
        if (ctx.warned.has(ledgerFailed)) return
        ctx.warned.add(ledgerFailed)
        ctx.options.onEvent({
          _tag: "Notice",
          at: Date.now(),
          message: `warning: the run ledger failed, the agents go on unrecorded: ${error.message}`
        })
      })
    )
  )
}

const ledgerFailed = "ledger failed"

const mergeBack = (
  ctx: Context,
  agent: PlanAgent,
  handle: WorkspaceModule.WorkspaceHandle,
  process: ProcessRunner.ProcessResult,
  releaseSlot: Effect.Effect<void>
) =>
  Effect.gen(function* () {
    const integration = ctx.integration
    if (integration === undefined) {
      yield* releaseSlot
      return { process, merge: "not merged", commit: undefined } satisfies AgentResult
    }
    const emit = ctx.options.onEvent
    const commitAll = integration
      .commitAll(handle, `corral ${ctx.options.runId}: ${agent.id}`)
      .pipe(timed(ctx, agent.id, "commitMs"))
    const commit = yield* ctx.workspace.recycleAfter(handle, Effect.andThen(releaseSlot, commitAll))
    if (!commit.changed) {
      const event: RunEvent = { _tag: "NothingToMerge", at: Date.now(), agentId: agent.id }
      emit(event)
      yield* recordEvent(ctx, event)
      return { process, merge: "nothing to merge", commit: undefined } satisfies AgentResult
    }
    const others = [...ctx.committed.values()]
    ctx.committed.set(handle, { agentId: agent.id, commit: commit.commit, base: handle.baseCommit })
    yield* KillPoint.waitAt("merging", agent.id)
    const merged = yield* Effect.gen(function* () {
      const predictions = yield* integration
        .predictConflicts(handle, others)
        .pipe(Effect.orElseSucceed((): ReadonlyArray<WorkspaceModule.ConflictPrediction> => []))
      for (const prediction of predictions) {
        emit({ _tag: "ConflictPredicted", at: Date.now(), agents: prediction.agents, paths: prediction.paths })
      }
      return yield* integration.merge(handle)
    }).pipe(timed(ctx, agent.id, "mergeMs"))
    if (merged._tag === "Conflict") {
      const event: RunEvent = {
        _tag: "MergeConflict",
        at: Date.now(),
        agentId: agent.id,
        branch: merged.branch,
        paths: merged.paths
      }
      emit(event)
      yield* recordEvent(ctx, event)
      return yield* new MergeConflict({ agentId: agent.id, branch: merged.branch, paths: merged.paths })
    }
    KillPoint.reached("merged", agent.id)
    ctx.committed.delete(handle)
    const event: RunEvent = { _tag: "Merged", at: Date.now(), agentId: agent.id, commit: merged.head }
    emit(event)
    yield* recordEvent(ctx, event)
    return { process, merge: "merged", commit: merged.head } satisfies AgentResult
  })

const onRelease = (ctx: Context, report: WorkspaceModule.ReleaseReport): void => {
  if (report.workspace !== "kept") return
  ctx.kept.push(report)
  ctx.options.onEvent({
    _tag: "WorkspaceKept",
    at: Date.now(),
    agentId: report.agentId,
    path: report.dir,
    reason: report.reasons.join("; ")
  })
}
