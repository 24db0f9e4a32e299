/**
 * What corral created in a repository for each run, and where the run's liveness lease lives: one
 * folder per repository, `<git-common-dir>/corral/runs/` (`<repo>/.corral/runs/` outside git), the
 * same whatever `--state-dir`, `CORRAL_HOME` or `--repo` a command was given, so that `corral gc` and
 * `corral discard` see every live run and touch only what corral made.
 *
 * - `<runId>.json`: the lease (pid, host, heartbeat) while the run is alive.
 * - `<runId>.records`: one JSON line per branch, worktree and copied file, written before corral
 *   creates it; so after a crash at any instant every corral-made branch is named there.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { GitFailure } from "./Git.ts"
import * as registry from "./internal/runRegistry.ts"
import type { FsFailure } from "./internal/workspaceFs.ts"
import { isLeaseAlive, type LeaseFile, leasePath, readLease, readLeases } from "./internal/workspaceLease.ts"
import { defaultConfig } from "./Workspace.ts"

/**
 * Branches, worktrees and copied files (absolute paths) corral created for one run.
 *
 * @since 0.1.0
 * @category models
 */
export type RunRecords = registry.RunRecords

/**
 * The registry folder of `repo`.
 *
 * @since 0.1.0
 * @category reading
 */
export const root: (repo: string) => Effect.Effect<string, GitFailure | FsFailure> = registry.registryRoot

/**
 * What corral recorded for `runId` in `repo` (empty lists when nothing was recorded).
 *
 * @example
 * ```ts
 * import { RunRegistry } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const made = yield* RunRegistry.records("/path/to/repo", "20261126-101500-ab12")
 *   return made.branches // ["corral/20261126-101500-ab12/integration", "corral/20261126-101500-ab12/fmt-src", ...]
 * })
 * ```
 * @since 0.1.0
 * @category reading
 */
export const records = (repo: string, runId: string): Effect.Effect<RunRecords, GitFailure | FsFailure> =>
  Effect.flatMap(registry.registryRoot(repo), (dir) => registry.readRecords(dir, runId))

/**
 * The runs with records in `repo`.
 *
 * @since 0.1.0
 * @category reading
 */
export const runs = (repo: string): Effect.Effect<ReadonlyArray<string>, GitFailure | FsFailure> =>
  Effect.flatMap(registry.registryRoot(repo), registry.listRecordedRuns)

/**
 * A run's lease as read from the registry, and whether it is live.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lease {
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly heartbeatAt: number
  /** Its process is running (same host), or its heartbeat is recent (another host). */
  readonly live: boolean
}

/**
 * `runId`'s lease in `repo`, or `undefined` when it has none (it ended, or never started here).
 *
 * @since 0.1.0
 * @category reading
 */
export const lease = (repo: string, runId: string): Effect.Effect<Lease | undefined, GitFailure | FsFailure> =>
  Effect.gen(function* () {
    const found = yield* readLease(yield* registry.registryRoot(repo), runId)
    return found === undefined ? undefined : judged(found, yield* Clock.currentTimeMillis)
  })

const judged = (lease: LeaseFile, now: number): Lease => ({
  ...lease,
  live: isLeaseAlive(lease, now, defaultConfig.staleAfter)
})

/**
 * Every lease in `repo`'s registry, by run id: one read of the folder and of each lease file.
 *
 * @since 0.1.0
 * @category reading
 */
export const leases = (repo: string): Effect.Effect<ReadonlyMap<string, Lease>, GitFailure | FsFailure> =>
  Effect.gen(function* () {
    const found = yield* readLeases(yield* registry.registryRoot(repo))
    const now = yield* Clock.currentTimeMillis
    return new Map([...found].map(([runId, lease]) => [runId, judged(lease, now)] as const))
  })

/**
 * Whether `runId` holds a live lease in `repo`: its process is running (same host), or its heartbeat
 * is recent (another host).
 *
 * @since 0.1.0
 * @category reading
 */
export const isLive = (repo: string, runId: string): Effect.Effect<boolean, GitFailure | FsFailure> =>
  Effect.map(lease(repo, runId), (found) => found?.live === true)

/**
 * The files that hold `runId`'s records and its lease in `repo`, whether they exist or not.
 *
 * @since 0.1.0
 * @category reading
 */
export const files = (repo: string, runId: string): Effect.Effect<ReadonlyArray<string>, GitFailure | FsFailure> =>
  Effect.map(registry.registryRoot(repo), (dir) => [registry.recordsPath(dir, runId), leasePath(dir, runId)])

/**
 * Forgets `runId`'s records, once everything they name is gone.
 *
 * @since 0.1.0
 * @category writing
 */
export const forget = (repo: string, runId: string): Effect.Effect<void, GitFailure | FsFailure> =>
  Effect.flatMap(registry.registryRoot(repo), (dir) => registry.removeRecords(dir, runId))
