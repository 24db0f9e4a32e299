/**
 * Worktree isolation for `corral run --cluster`: the coordinator's side of workspaces across
 * machines (`RemoteWorkspace`). The run's integration branch lives in the user's repository, as in
 * a local run. Before an agent starts, the integration head is published to the remote and becomes
 * the agent's base; the runner works in its own worktree and pushes the agent's branch; once the
 * agent succeeds, its branch is fetched back and merged here exactly as a local workspace's work:
 * early conflict warnings against the other agents waiting to merge, one merge at a time while the
 * agent's claims are held, a conflict keeps the branch for review, and the same events and ledger
 * records.
 *
 * @since 0.1.0
 */
import type { ProcessKind } from "@corral/cluster"
import * as RemoteWorkspace from "@corral/platform-node/RemoteWorkspace"
import { Workspace } from "@corral/platform-node/Workspace"
import type * as WorkspaceModule from "@corral/platform-node/Workspace"
import * as Effect from "effect/Effect"
import * as Semaphore from "effect/Semaphore"
import * as NodePath from "node:path"
import * as KillPoint from "./internal/killPoint.ts"
import type { Plan, PlanAgent } from "./PlanFile.ts"
import type { RunEvent } from "./RunEvent.ts"
import { MergeConflict, sparseFolders } from "./RunPlan.ts"

/**
 * The coordinator's workspaces of one cluster run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClusterWorkspaces {
  readonly remote: string
  readonly integration: WorkspaceModule.Integration
  /** Publishes the integration head to the remote; the agent's workspace starts there. */
  readonly prepare: (
    agent: PlanAgent
  ) => Effect.Effect<
    NonNullable<typeof ProcessKind.Input.Type.workspace>,
    RemoteWorkspace.RemoteError | WorkspaceModule.WorkspaceError
  >
  /**
   * Fetches what the agent's runner pushed (as `corral/<pushedBy>/<agentId>`, by default this run)
   * and merges it into the integration branch.
   */
  readonly mergeBack: (
    agent: PlanAgent,
    base: string,
    commit: string | undefined,
    pushedBy?: string | undefined
  ) => Effect.Effect<
    { readonly merge: "merged" | "nothing to merge"; readonly commit: string | undefined },
    MergeConflict | RemoteWorkspace.RemoteError | WorkspaceModule.WorkspaceError
  >
}

/**
 * Where agents' work meets: a path (made absolute, so runners resolve it the same way) or a URL as
 * given; without one, the bare repository beside `repo` (`RemoteWorkspace.defaultRemote`).
 *
 * @since 0.1.0
 * @category remotes
 */
export const remoteOf = (repo: string, given: string | undefined) => {
  if (given === undefined) return RemoteWorkspace.defaultRemote(repo)
  const isUrl = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(given) || /^[^/]+:/.test(given)
  return Effect.succeed(isUrl ? given : NodePath.resolve(given))
}

/**
 * The run's integration branch in `repo`, its lease (so `corral gc` leaves a live run alone), and
 * the remote's branches of the run, removed when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly repo: string
  readonly runId: string
  readonly plan: Plan
  readonly remote: string
  /** Start the integration branch from this commit or branch (a resumed run's integration head). @default "HEAD" */
  readonly base?: string | undefined
  readonly emit: (event: RunEvent) => Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    const { repo, runId, remote, emit } = options
    const workspace = yield* Workspace
    yield* workspace.registerRun(repo, runId)
    const integration = yield* workspace.integration({
      repo,
      runId,
      base: options.base,
      history: options.plan.history,
      author: options.plan.author,
      committer: options.plan.committer
    })
    yield* Effect.addFinalizer(() => RemoteWorkspace.clean(repo, remote, runId))
    const publishing = yield* Semaphore.make(1)
    const fetching = yield* Semaphore.make(1)
    let published: string | undefined
    /** Work fetched and not merged yet: what merge-time conflict predictions compare against. */
    const waiting = new Map<string, WorkspaceModule.CommittedWork>()

    const prepare = (agent: PlanAgent) =>
      publishing.withPermit(
        Effect.gen(function* () {
          const head = yield* integration.head()
          if (head !== published) {
            yield* RemoteWorkspace.publish(repo, remote, runId, head)
            published = head
          }
          const sparse = agent.sparse ? sparseFolders(agent) : undefined
          return {
            remote,
            base: head,
            author: integration.author,
            committer: integration.committer,
            ...(sparse === undefined ? {} : { sparse })
          }
        })
      )

    const land = (agent: PlanAgent, work: WorkspaceModule.FetchedWork) =>
      Effect.gen(function* () {
        const others = [...waiting.values()]
        waiting.set(agent.id, work)
        const predictions = yield* integration
          .predictConflicts(work, others)
          .pipe(Effect.orElseSucceed((): ReadonlyArray<WorkspaceModule.ConflictPrediction> => []))
        for (const prediction of predictions) {
          yield* emit({ _tag: "ConflictPredicted", at: Date.now(), agents: prediction.agents, paths: prediction.paths })
        }
        const merged = yield* integration.merge(work)
        if (merged._tag === "Conflict") {
          yield* emit({
            _tag: "MergeConflict",
            at: Date.now(),
            agentId: agent.id,
            branch: merged.branch,
            paths: merged.paths
          })
          return yield* new MergeConflict({ agentId: agent.id, branch: merged.branch, paths: merged.paths })
        }
        KillPoint.reached("merged", agent.id)
        yield* emit({ _tag: "Merged", at: Date.now(), agentId: agent.id, commit: merged.head })
        yield* RemoteWorkspace.dropBranch(repo, work)
        return { merge: "merged", commit: merged.head } as const
      }).pipe(Effect.ensuring(Effect.sync(() => waiting.delete(agent.id))))

    const mergeBack = (agent: PlanAgent, base: string, commit: string | undefined, pushedBy?: string | undefined) =>
      Effect.gen(function* () {
        if (commit === undefined) {
          yield* emit({ _tag: "NothingToMerge", at: Date.now(), agentId: agent.id })
          return { merge: "nothing to merge", commit: undefined } as const
        }
        const work = yield* fetching.withPermit(
          RemoteWorkspace.fetchWork(repo, remote, { runId: pushedBy ?? runId, agentId: agent.id, commit, base })
        )
        return yield* land(agent, work)
      })

    return { remote, integration, prepare, mergeBack } satisfies ClusterWorkspaces
  })
