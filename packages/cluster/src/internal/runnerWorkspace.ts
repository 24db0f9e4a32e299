import { createHash } from "node:crypto"
import * as Executor from "@corral/core/Executor"
import { Git, RemoteWorkspace, Workspace } from "@corral/platform-node"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"

/** What the coordinator sends with an agent that runs in a worktree on its runner. */
export interface RemoteWorkspaceInput {
  readonly remote: string
  readonly base: string
  readonly author: Workspace.Identity
  readonly committer: Workspace.Identity
  readonly sparse?: ReadonlyArray<string> | undefined
}

/**
 * A runner's workspace state: one workspace service (shared repository locks and port blocks), its
 * runs' leases, and the folder of its workspaces and agents' private folders (`undefined`:
 * `<repo>/.corral`).
 */
export interface RunnerWorkspaces {
  service: Workspace.Workspace["Service"] | undefined
  readonly stateDir: string | undefined
  readonly registered: Map<string, Registered>
  readonly registering: Semaphore.Semaphore
}

interface Registered {
  count: number
  readonly scope: Scope.Closeable
}

export const makeRunnerWorkspaces = (stateDir?: string): RunnerWorkspaces => ({
  service: undefined,
  stateDir,
  registered: new Map(),
  registering: Semaphore.makeUnsafe(1)
})

/** The runner's workspace state; `Runner.serve` provides a fresh one per runner. */
export const CurrentRunnerWorkspaces = Context.Reference<RunnerWorkspaces>(
  "@corral/cluster/internal/runnerWorkspace/CurrentRunnerWorkspaces",
  { defaultValue: () => makeRunnerWorkspaces() }
)

const workspaceService = (state: RunnerWorkspaces) =>
  Effect.suspend(() =>
    state.service !== undefined
      ? Effect.succeed(state.service)
      : Effect.scoped(Layer.build(Workspace.Workspace.layer)).pipe(
          Effect.map((context) => {
            state.service ??= Context.get(context, Workspace.Workspace)
            return state.service
          })
        )
  )

/**
 * The id under which this runner keeps a run's workspaces in its repository: its own, so that its
 * lease, records and branches never meet the coordinator's (or another runner's) when they share a
 * repository.
 */
export const localRunId = (runId: string): string => {
  const id = `${runId}.r${process.pid}`
  return id.length <= 64 ? id : `${createHash("sha256").update(runId).digest("hex").slice(0, 40)}.r${process.pid}`
}

/** The run's lease in the runner's repository, held while any of its agents runs here. */
const holdRun = (state: RunnerWorkspaces, ws: Workspace.Workspace["Service"], repo: string, runId: string) => {
  const { registered, registering } = state
  return Effect.acquireRelease(
    registering.withPermit(
      Effect.gen(function* () {
        const key = `${repo}\0${runId}`
        const known = registered.get(key)
        if (known !== undefined) {
          known.count++
          return key
        }
        const scope = yield* Scope.make()
        yield* ws.registerRun(repo, runId).pipe(
          Scope.provide(scope),
          Effect.onError(() => Scope.close(scope, Exit.void))
        )
        registered.set(key, { count: 1, scope })
        return key
      })
    ),
    (key) =>
      registering.withPermit(
        Effect.suspend(() => {
          const known = registered.get(key)
          if (known === undefined) return Effect.void
          known.count--
          if (known.count > 0) return Effect.void
          registered.delete(key)
          return Scope.close(known.scope, Exit.void)
        })
      )
  )
}

/**
 * The runner's workspace service, with the run's lease held in `repo` until the calling scope closes,
 * and the id under which the run's workspaces are kept there (see {@link localRunId}).
 */
const leaseRun = (repo: string, runId: string) =>
  Effect.gen(function* () {
    const state = yield* CurrentRunnerWorkspaces
    const ws = yield* workspaceService(state)
    const local = localRunId(runId)
    yield* holdRun(state, ws, repo, local)
    return { ws, local, stateDir: state.stateDir }
  })

/**
 * Runs `use` in a disposable worktree of `repo` started at the run's base (fetched from the remote),
 * then commits what the agent left and pushes the agent's branch to the remote. The worktree and its
 * branch are removed on every exit path (success, failure, interruption).
 */
export const inRemoteWorkspace = <A, E, R>(
  repo: string,
  runId: string,
  agentId: string,
  input: RemoteWorkspaceInput,
  use: (handle: Workspace.WorkspaceHandle) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const isRepo = yield* Git.test(["rev-parse", "--git-dir"], { cwd: repo }).pipe(
        Effect.catchTag("GitError", () => Effect.succeed(false))
      )
      if (!isRepo) {
        return yield* Effect.fail(
          new RemoteWorkspace.RemoteError({
            remote: input.remote,
            operation: "fetch the base into this runner's repository from",
            detail: `the runner's --repo ${repo} is not a git repository; worktree agents need a clone of the repository`
          })
        )
      }
      const { ws, local, stateDir } = yield* leaseRun(repo, runId)
      yield* RemoteWorkspace.fetchBase(repo, input.remote, runId, input.base)
      const handle = yield* ws.acquire({
        repo,
        stateDir,
        runId: local,
        agentId,
        strategy: "worktree",
        base: input.base,
        sparse: input.sparse,
        disposable: true
      })
      const result = yield* use(handle)
      const committed = yield* RemoteWorkspace.commit(handle, {
        runId,
        message: `corral ${runId}: ${agentId}`,
        author: input.author,
        committer: input.committer
      })
      if (!committed.changed) return { result, commit: undefined }
      if (!(yield* Executor.stillCurrent)) return yield* Effect.interrupt
      yield* RemoteWorkspace.push(handle, input.remote, runId)
      return { result, commit: committed.commit }
    })
  )

/**
 * Runs `use` in the runner's repository itself (`isolation: none`), with the workspace environment
 * of a local run (`CORRAL_WORKSPACE`, ports, private temp, data and cache folders), removed when it ends.
 */
export const inSharedWorkspace = <A, E, R>(
  repo: string,
  runId: string,
  agentId: string,
  use: (handle: Workspace.WorkspaceHandle) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { ws, local, stateDir } = yield* leaseRun(repo, runId)
      const handle = yield* ws.acquire({ repo, stateDir, runId: local, agentId, strategy: "none" })
      return yield* use(handle)
    })
  )
