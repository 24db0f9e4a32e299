/**
 * Isolated workspaces for agents: one git worktree (or folder copy) per agent, a private environment
 * (port block, temp and cache folders, build namespace), merge-back into a per-run integration branch
 * with conflict detection, early conflict warnings, and garbage collection of crashed runs.
 *
 * The user's checkout, index and current branch are never modified: merges run with
 * `git merge-tree --write-tree`, `git commit-tree` and a compare-and-swap `git update-ref`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as Git from "./Git.ts"
import * as errors from "./internal/workspaceErrors.ts"
import { checkConfig } from "./internal/workspaceLease.ts"
import * as overlay from "./internal/workspaceOverlay.ts"
import { locateRepo } from "./internal/workspaceRepo.ts"
import { makeWorkspace } from "./internal/workspaceService.ts"

/**
 * `worktree`: a git worktree on branch `corral/<runId>/<agentId>`. `directory`: a copy of the folder
 * (`cp --reflink=auto -a`). `none`: the shared folder itself.
 *
 * @since 0.1.0
 * @category models
 */
export type Strategy = "worktree" | "directory" | "none"

/**
 * @since 0.1.0
 * @category models
 */
export interface AcquireOptions {
  /** The user's repository (or folder for `directory` / `none`). */
  readonly repo: string
  readonly runId: string
  readonly agentId: string
  /**
   * The name of the workspace's folder (`<stateDir>/worktrees/<runId>/<folder>`), branch
   * (`corral/<runId>/<folder>`), private folders and overlay layers, with the rules of `agentId`;
   * the handle, its environment, its commits' trailers and its release report keep `agentId`. A
   * retry whose earlier attempt's workspace was kept takes another (`corral run`:
   * `<agent>-attempt-<n>`). @default agentId
   */
  readonly folder?: string | undefined
  /** @default "worktree" */
  readonly strategy?: Strategy | undefined
  /** Commit to start from, usually `integration.head()`. @default "HEAD" */
  readonly base?: string | undefined
  /** Untracked files (relative paths such as `.env`) copied from the repository into the workspace. */
  readonly copyFiles?: ReadonlyArray<string> | undefined
  /**
   * Folders to check out (cone-mode sparse checkout: each folder, the top-level files and the files
   * directly inside each folder's parents); everything when omitted. Folders, not patterns: `*`, `?`,
   * `[`, `]`, `\`, `..` and the repository's root fail with `InvalidSparseFolder` before anything is
   * created.
   */
  readonly sparse?: ReadonlyArray<string> | undefined
  /**
   * An overlay workspace (Linux, worktrees only): the agent's folder is an overlayfs mount of a
   * read-only snapshot of its base commit, shared by the run's agents starting there, under an empty
   * folder of its own; nothing is checked out per agent, and a commit reads only the files the agent
   * wrote. The folder is mounted only inside the commands that {@link overlayPrefix} wraps (corral's
   * own git commands on it run the same way): outside them `handle.dir` holds just the `.git` file.
   * Needs `unshare` (util-linux; `CORRAL_UNSHARE` names another) and unprivileged user namespaces
   * with overlayfs; else the acquire fails with `OverlayUnavailable` before anything is created.
   * `sparse` and `recycle` are ignored (there is no checkout to narrow or reuse). @default false
   */
  readonly overlay?: boolean | undefined
  /** Where workspaces, leases and caches live. @default "<repo>/.corral" */
  readonly stateDir?: string | undefined
  /**
   * Reuse worktrees within the run: a released clean worktree is cleaned of every untracked and
   * ignored file (`git clean -ffdx`) and handed to the run's next agent, which checks out its own
   * branch in it. A merged agent's branch stays checked out in the pooled worktree until then and is
   * deleted, with the run's other merged branches, when the run's `registerRun` scope closes, which
   * also removes the pool; any other worktree is detached and its branch released at once. A sparse
   * and a full workspace share the pool: the next agent's checkout applies its own cone (or, for a
   * full one, writes every file back). @default false
   */
  readonly recycle?: boolean | undefined
  /** Keep the workspace (and its branch) at release instead of removing it. @default false */
  readonly keep?: boolean | undefined
  /**
   * A workspace whose work lives elsewhere once it is done (a cluster runner's, whose agent branch is
   * pushed to a remote, and whose agent runs again from its base when it did not finish): at release
   * its worktree is removed and its branch deleted even with uncommitted changes or unpushed commits,
   * and `gc` does the same for it once its run is dead. Worktrees only. @default false
   */
  readonly disposable?: boolean | undefined
  /** Called from the scope finalizer with what was removed or kept. */
  readonly onRelease?: ((report: ReleaseReport) => Effect.Effect<void>) | undefined
}

/**
 * A live workspace. `env` is meant to be merged into the agent process environment.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceHandle {
  readonly repo: string
  readonly runId: string
  readonly agentId: string
  readonly strategy: Strategy
  readonly dir: string
  readonly branch: string | undefined
  readonly baseCommit: string | undefined
  readonly namespace: string
  readonly ports: { readonly first: number; readonly count: number }
  readonly env: Readonly<Record<string, string>>
  /** Files copied by `copyFiles`; never committed, and removed at release when unchanged. */
  readonly copiedFiles: ReadonlyArray<string>
  readonly warnings: ReadonlyArray<string>
  /** The layers of an overlay workspace (see `AcquireOptions.overlay`); `undefined` otherwise. */
  readonly overlay?: OverlayLayers | undefined
}

/**
 * The layers of an overlay workspace: `lower` the shared read-only snapshot, `upper` the agent's
 * changes (whiteouts for deletions), `work` overlayfs's own folder.
 *
 * @since 0.1.0
 * @category models
 */
export interface OverlayLayers {
  readonly lower: string
  readonly upper: string
  readonly work: string
}

/**
 * Why this machine cannot mount an overlay workspace (not Linux, no `unshare`, no unprivileged user
 * namespaces or overlayfs), or `undefined` when it can. Probes once per process (one mount in a
 * throwaway namespace).
 *
 * @since 0.1.0
 * @category workspaces
 */
export const overlayProblem = (): string | undefined => overlay.overlayProblem()

/**
 * The command prefix that runs a command (its argv appended) inside an overlay workspace's view,
 * mounted at `handle.dir`, with `handle.dir` as its working folder; `undefined` for any other
 * workspace. The mount lives in a private mount namespace (`unshare -rm`) and ends with the command.
 *
 * @example
 * ```ts
 * import { overlayPrefix, type WorkspaceHandle } from "@corral/platform-node/Workspace"
 *
 * declare const handle: WorkspaceHandle
 * const argv = [...(overlayPrefix(handle) ?? []), "npm", "test"]
 * ```
 * @since 0.1.0
 * @category workspaces
 */
export const overlayPrefix = (handle: WorkspaceHandle): ReadonlyArray<string> | undefined =>
  handle.overlay === undefined
    ? undefined
    : overlay.mountPrefix(overlay.findUnshare() ?? "unshare", handle.overlay, handle.dir)

/**
 * What the release of a workspace did. Work is never destroyed: a dirty worktree or folder copy is
 * kept, and a branch is deleted only when its commits are reachable from its base or integration branch.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReleaseReport {
  readonly agentId: string
  readonly dir: string
  /** `recycled`: cleaned and pooled for the run's next agent (see `AcquireOptions.recycle`). */
  readonly workspace: "removed" | "recycled" | "kept" | "shared"
  readonly branch: "deleted" | "kept" | "none"
  readonly reasons: ReadonlyArray<string>
}

/**
 * @since 0.1.0
 * @category models
 */
export type MergeResult =
  | { readonly _tag: "Merged"; readonly head: string; readonly fastForward: boolean }
  | { readonly _tag: "UpToDate"; readonly head: string }
  | {
      readonly _tag: "Conflict"
      readonly head: string
      readonly agentId: string
      readonly branch: string
      readonly paths: ReadonlyArray<string>
    }

/**
 * Files that two parties (agents, or an agent and `"integration"`) both changed incompatibly.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConflictPrediction {
  readonly agents: readonly [string, string]
  readonly paths: ReadonlyArray<string>
}

/**
 * The result of {@link Integration.commitAll}: `commit` is the branch tip, `changed` whether a commit was made.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommitResult {
  readonly commit: string
  readonly changed: boolean
}

/**
 * How an agent's work lands on the integration branch:
 *
 * - `merge` (default): the agent's commits, then a merge commit with two parents (a fast-forward when
 *   nothing else landed since the agent started).
 * - `squash`: one commit per agent on top of the integration head (the agent's own commits stay on its branch).
 * - `linear`: each of the agent's commits replayed on top of the integration head, no merge commits
 *   (an agent whose commits include a merge lands squashed).
 *
 * Every commit corral writes carries the trailers `Corral-Run: <runId>` and `Corral-Agent: <agentId>`.
 *
 * @since 0.1.0
 * @category models
 */
export type History = "merge" | "squash" | "linear"

/**
 * A git identity.
 *
 * @since 0.1.0
 * @category models
 */
export interface Identity {
  readonly name: string
  readonly email: string
}

/**
 * Another agent's work as a commit, for {@link Integration.predictConflicts}: used as it is, its
 * worktree is not read.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommittedWork {
  readonly agentId: string
  readonly commit: string
  /** The commit the agent's work started from; a change already there is not the agent's own. */
  readonly base?: string | undefined
}

/**
 * An agent's work committed elsewhere (on a cluster runner) and fetched into the repository as
 * `branch` at `commit`: {@link Integration.merge} lands it as it would a local workspace's work.
 *
 * @since 0.1.0
 * @category models
 */
export interface FetchedWork extends CommittedWork {
  readonly branch: string
}

/**
 * The integration branch `corral/<runId>/integration` of one run. Merges are applied one at a time.
 *
 * @example
 * ```ts
 * import { Workspace } from "@corral/platform-node/Workspace"
 * import { Effect } from "effect"
 *
 * const repo = "/path/to/repo"
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const ws = yield* Workspace
 *   const integration = yield* ws.integration({ repo, runId: "r1" })
 *   const handle = yield* ws.acquire({ repo, runId: "r1", agentId: "a", base: yield* integration.head() })
 *   yield* integration.commitAll(handle, "add parser")
 *   return yield* integration.merge(handle) // { _tag: "Merged" } or { _tag: "Conflict", paths }
 * })).pipe(Effect.provide(Workspace.layer))
 * ```
 * @since 0.1.0
 * @category models
 */
export interface Integration {
  readonly repo: string
  readonly runId: string
  readonly branch: string
  readonly baseCommit: string
  readonly history: History
  /** Author of the commits corral writes (and of `commitAll` commits). */
  readonly author: Identity
  readonly committer: Identity
  /** The branch tip; this process's own merges are remembered, so this usually runs no git command. */
  readonly head: () => Effect.Effect<string, WorkspaceError>
  readonly commitAll: (handle: WorkspaceHandle, message: string) => Effect.Effect<CommitResult, WorkspaceError>
  /** Lands a workspace's committed work, or work fetched from elsewhere ({@link FetchedWork}). */
  readonly merge: (handle: WorkspaceHandle | FetchedWork) => Effect.Effect<MergeResult, WorkspaceError>
  /**
   * Files that would conflict when `handle`'s work is merged, against the integration head and each of
   * `others`. A workspace's committed work (from `commitAll`) is used as committed; a workspace that has
   * not committed is snapshotted through a temporary index. Never pass a workspace being released.
   */
  readonly predictConflicts: (
    handle: WorkspaceHandle | FetchedWork,
    others: ReadonlyArray<WorkspaceHandle | CommittedWork>
  ) => Effect.Effect<ReadonlyArray<ConflictPrediction>, WorkspaceError>
  /**
   * Deletes the branch when it still points at {@link Integration.baseCommit} (nothing was merged),
   * so a run that merged nothing leaves no branch; true when it deleted it. A branch that moved,
   * here or elsewhere, is kept. Call it once the run's merges are over.
   */
  readonly dropIfEmpty: () => Effect.Effect<boolean, WorkspaceError>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface IntegrationOptions {
  readonly repo: string
  readonly runId: string
  /** @default "HEAD" */
  readonly base?: string | undefined
  /** @default "merge" */
  readonly history?: History | undefined
  /** @default the repository's `user.name` / `user.email`, else `corral <corral@localhost>` */
  readonly author?: Identity | undefined
  /** @default the author */
  readonly committer?: Identity | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GcOptions {
  readonly repo: string
  /**
   * Only runs at least this old are collected: a crashed run's age counts from its lease's last
   * heartbeat, that of a run that ended from the newest of its records (touched as its lease goes),
   * its worktrees folder and its time in `endedAt`, and a run with none of these is old enough. A run
   * with a live lease is never touched, whatever `stateDir` says. A duration `DurationOption.millis`
   * refuses dies with `LeaseTables.InvalidOption`, before anything is read. @default 0
   */
  readonly olderThan?: Duration.Input | undefined
  /**
   * When runs ended (epoch milliseconds by run id, e.g. from the `RunLedger`): a run with no
   * worktree records nothing in the run registry, and its worktrees folder (directory copies)
   * dates from when its copies were made. @default none
   */
  readonly endedAt?: ReadonlyMap<string, number> | undefined
  readonly dryRun?: boolean | undefined
  /** Where leftover workspace folders are looked for. @default "<repo>/.corral" */
  readonly stateDir?: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GcItem {
  readonly kind: "worktree" | "branch" | "directory" | "lease" | "overlay"
  readonly target: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GcReport {
  readonly removed: ReadonlyArray<GcItem>
  readonly kept: ReadonlyArray<GcItem & { readonly reason: string }>
}

/**
 * A run's liveness lease at `<git-common-dir>/corral/runs/<runId>.json` (`<repo>/.corral/runs/` outside
 * git): one place per repository whatever state folder the run uses (see `RunRegistry`).
 *
 * @since 0.1.0
 * @category models
 */
export interface RunLease {
  readonly runId: string
  readonly path: string
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /**
   * First port of the first block. `portBase`, `portsPerAgent` and `portBlocks` are whole numbers
   * from 1 to 65535, and the last block must end at port 65535 at most
   * (`portBase + portBlocks * portsPerAgent - 1`); {@link Workspace.layerWith} dies with
   * `LeaseTables.InvalidOption` naming the setting otherwise.
   * @default 20000
   */
  readonly portBase: number
  /**
   * Ports per agent. A block is held machine-wide by its first port (docs/workspaces.md), so processes
   * with another `portBase` or `portsPerAgent` can be given overlapping blocks.
   * @default 10
   */
  readonly portsPerAgent: number
  /** Number of blocks (live agents) available. @default 1000 */
  readonly portBlocks: number
  /** How often leases are refreshed. @default "10 seconds" */
  readonly heartbeat: Duration.Input
  /** A lease from another host whose heartbeat is older than this counts as dead. @default "5 minutes" */
  readonly staleAfter: Duration.Input
}

/**
 * The work tree holding `repo`: its root and git folder (one git command the first time in a
 * process, none after; worktree workspaces use the same lookup). Fails with `NotAGitRepository`
 * outside a git work tree, a bare repository included.
 *
 * @since 0.1.0
 * @category repository
 */
export const locate: (
  repo: string
) => Effect.Effect<
  { readonly root: string; readonly commonDir: string },
  errors.NotAGitRepository | Git.GitFailure | errors.WorkspaceIoError
> = locateRepo

/**
 * @since 0.1.0
 * @category errors
 */
export const NotAGitRepository = errors.NotAGitRepository
/**
 * @since 0.1.0
 * @category errors
 */
export type NotAGitRepository = errors.NotAGitRepository
/**
 * @since 0.1.0
 * @category errors
 */
export const BranchAlreadyExists = errors.BranchAlreadyExists
/**
 * @since 0.1.0
 * @category errors
 */
export type BranchAlreadyExists = errors.BranchAlreadyExists
/**
 * @since 0.1.0
 * @category errors
 */
export const InvalidWorkspaceId = errors.InvalidWorkspaceId
/**
 * @since 0.1.0
 * @category errors
 */
export type InvalidWorkspaceId = errors.InvalidWorkspaceId
/**
 * A `sparse` folder that cone mode cannot check out: empty, outside the repository, or a pattern.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidSparseFolder = errors.InvalidSparseFolder
/**
 * @since 0.1.0
 * @category errors
 */
export type InvalidSparseFolder = errors.InvalidSparseFolder
/**
 * @since 0.1.0
 * @category errors
 */
export const WorkspaceIoError = errors.WorkspaceIoError
/**
 * @since 0.1.0
 * @category errors
 */
export type WorkspaceIoError = errors.WorkspaceIoError
/**
 * @since 0.1.0
 * @category errors
 */
export const PortsExhausted = errors.PortsExhausted
/**
 * @since 0.1.0
 * @category errors
 */
export type PortsExhausted = errors.PortsExhausted
/**
 * @since 0.1.0
 * @category errors
 */
export const IntegrationMoved = errors.IntegrationMoved
/**
 * @since 0.1.0
 * @category errors
 */
export type IntegrationMoved = errors.IntegrationMoved
/**
 * @since 0.1.0
 * @category errors
 */
export const UnsupportedStrategy = errors.UnsupportedStrategy
/**
 * @since 0.1.0
 * @category errors
 */
export type UnsupportedStrategy = errors.UnsupportedStrategy

/**
 * An overlay workspace was asked for on a machine that cannot mount one (not Linux, no `unshare`, no
 * unprivileged user namespaces or overlayfs), or under a path overlayfs cannot take.
 *
 * @since 0.1.0
 * @category errors
 */
export const OverlayUnavailable = errors.OverlayUnavailable
/**
 * @since 0.1.0
 * @category errors
 */
export type OverlayUnavailable = errors.OverlayUnavailable

/**
 * Every failure of this module, including git failures (`GitError`, `GitNotFound`, `DiskFull`).
 *
 * @since 0.1.0
 * @category errors
 */
export type WorkspaceError = errors.WorkspaceError

/**
 * Default {@link Config}.
 *
 * @since 0.1.0
 * @category config
 */
export const defaultConfig: Config = {
  portBase: 20000,
  portsPerAgent: 10,
  portBlocks: 1000,
  heartbeat: "10 seconds",
  staleAfter: "5 minutes"
}

/**
 * Workspaces for agents. One instance per process: it serializes worktree changes per repository and
 * hands out non-overlapping port blocks.
 *
 * @example
 * ```ts
 * import { Workspace } from "@corral/platform-node/Workspace"
 * import { Effect } from "effect"
 *
 * const repo = "/path/to/repo"
 * const program = Effect.scoped(Effect.gen(function*() {
 *   const ws = yield* Workspace
 *   yield* ws.registerRun(repo, "r1")
 *   const handle = yield* ws.acquire({ repo, runId: "r1", agentId: "a" })
 *   return handle.dir // run the agent in handle.dir with handle.env
 * })).pipe(Effect.provide(Workspace.layer))
 * ```
 * @since 0.1.0
 * @category services
 */
export class Workspace extends Context.Service<
  Workspace,
  {
    readonly acquire: (options: AcquireOptions) => Effect.Effect<WorkspaceHandle, WorkspaceError, Scope.Scope>
    /**
     * Runs `lastUse` — the agent's last use of its folder, typically `Integration.commitAll` — and
     * then, for a workspace acquired with `recycle: true`, hands its worktree to the run's pool at
     * once (when it is byte-clean after `git clean -ffdx`), instead of when the workspace's scope
     * closes: the merge needs no worktree. While `lastUse` runs, an agent acquiring a workspace of the
     * same run when no worktree is free adds one, once per run (`CORRAL_POOL_SPARES`, default 1);
     * later ones wait for this worktree, as does any acquire once `lastUse` is done and the check and
     * clean run. After it, `handle.dir` belongs to the pool: merge, predict and release only. Any
     * other workspace just runs `lastUse`.
     */
    readonly recycleAfter: <A, E, R>(handle: WorkspaceHandle, lastUse: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    /**
     * Says that the run `runId` will take no more pooled worktree: every agent of it has its
     * workspace (a retried agent adds a worktree of its own). The run's free pooled worktrees are
     * removed now, while its last agents still run, and worktrees released from now on are removed
     * rather than pooled, so that little is left to remove when the run ends.
     */
    readonly closePool: (runId: string) => Effect.Effect<void>
    readonly integration: (options: IntegrationOptions) => Effect.Effect<Integration, WorkspaceError>
    readonly registerRun: (repo: string, runId: string) => Effect.Effect<RunLease, WorkspaceError, Scope.Scope>
    readonly gc: (options: GcOptions) => Effect.Effect<GcReport, WorkspaceError>
  }
>()("@corral/platform-node/Workspace") {
  /**
   * The service with {@link defaultConfig}.
   *
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<Workspace> = Layer.sync(Workspace, () => makeWorkspace(defaultConfig))

  /**
   * The service with some settings overridden, e.g. `Workspace.layerWith({ portBase: 30000 })`. A
   * `heartbeat` or `staleAfter` that is not a positive, finite duration, and port settings that are
   * not whole numbers from 1 to 65535 or whose last block ends above port 65535, die with
   * `LeaseTables.InvalidOption` naming the setting, before anything is created.
   *
   * @since 0.1.0
   */
  static readonly layerWith = (config: Partial<Config>): Layer.Layer<Workspace> =>
    Layer.effect(Workspace, Effect.map(checkConfig({ ...defaultConfig, ...config }), makeWorkspace))
}
