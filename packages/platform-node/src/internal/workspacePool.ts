/**
 * Worktrees of a run waiting to be reused by its next agent. `git clean -ffdx` has removed every
 * untracked and ignored file of a pooled worktree, so the next agent gets it with one `checkout -f -b`
 * of its own base (changed files only) instead of a full `worktree add`, and the run saves the
 * `worktree remove` of every agent but the last few.
 *
 * A pooled worktree whose agent's work was merged still has that agent's branch checked out (at the
 * merged tip): once the next agent's checkout has left it, or the pool's worktree is removed, the
 * branch is retired, and the run's retired branches are deleted together when the run ends (one
 * `update-ref --stdin` transaction, each deletion checked against its merged tip). Any other pooled
 * worktree is detached and its agent's branch was released on its own.
 */
import * as Effect from "effect/Effect"

/** A merged agent's branch and the tip it was merged at. */
export interface MergedBranch {
  readonly branch: string
  readonly tip: string
}

export interface Pooled {
  readonly dir: string
  /** The repository's root (where `git worktree remove` runs) and its git folder (for the repository lock). */
  readonly root: string
  readonly commonDir: string
  /** The merged agent branch still checked out in the worktree, if any. */
  readonly checkedOut?: MergedBranch | undefined
}

/** A merged branch no worktree has checked out any more, to delete when the run ends. */
export interface Retired extends MergedBranch {
  readonly root: string
}

interface Pool {
  readonly free: Array<Pooled>
  readonly retired: Array<Retired>
  /** Releases under way that may add a worktree. */
  pending: number
  readonly waiters: Array<() => void>
}

export type Pools = Map<string, Pool>

export const makePools = (): Pools => new Map()

export const poolKey = (commonDir: string, runId: string) => `${commonDir}\0${runId}`

const poolOf = (pools: Pools, key: string): Pool => {
  const existing = pools.get(key)
  if (existing !== undefined) return existing
  const created: Pool = { free: [], retired: [], pending: 0, waiters: [] }
  pools.set(key, created)
  return created
}

const wake = (pool: Pool) => {
  for (const waiter of pool.waiters.splice(0)) waiter()
}

export const takePooled = (pools: Pools, key: string): Pooled | undefined => pools.get(key)?.free.pop()

/** Notes that `pooled`'s merged branch is no longer checked out: it is deleted when the run ends. */
export const retire = (pools: Pools, key: string, pooled: Pooled): void => {
  if (pooled.checkedOut !== undefined) poolOf(pools, key).retired.push({ ...pooled.checkedOut, root: pooled.root })
}

/**
 * Waits while no worktree is free but a release that may free one is under way: recycling one (a
 * status and a clean, and a detach when its work was not merged) costs less than a `worktree add`.
 */
export const awaitPooled = (pools: Pools, key: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const pool = pools.get(key)
    if (pool === undefined || pool.free.length > 0 || pool.pending === 0) return Effect.void
    return Effect.callback<void>((resume) => {
      const waiter = () => resume(Effect.void)
      pool.waiters.push(waiter)
      return Effect.sync(() => {
        const index = pool.waiters.indexOf(waiter)
        if (index >= 0) pool.waiters.splice(index, 1)
      })
    }).pipe(Effect.andThen(awaitPooled(pools, key)))
  })

/** Marks a release under way for `key` until `effect` ends; waiters are woken then. */
export const releasing = <A, E, R>(pools: Pools, key: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      poolOf(pools, key).pending++
    }),
    () => effect,
    () =>
      Effect.sync(() => {
        const pool = poolOf(pools, key)
        pool.pending--
        wake(pool)
      })
  )

export const putPooled = (pools: Pools, key: string, entry: Pooled): void => {
  const pool = poolOf(pools, key)
  pool.free.push(entry)
  wake(pool)
}

/**
 * Takes `branch` out of the run's merged branches waiting for deletion (a retried agent re-creates
 * it): the retired entry, or the pooled worktree that still has it checked out.
 */
export const reclaim = (
  pools: Pools,
  key: string,
  branch: string
): { readonly retired?: Retired | undefined; readonly pooled?: Pooled | undefined } => {
  const pool = pools.get(key)
  if (pool === undefined) return {}
  const retiredAt = pool.retired.findIndex((entry) => entry.branch === branch)
  if (retiredAt >= 0) return { retired: pool.retired.splice(retiredAt, 1)[0] }
  const pooledAt = pool.free.findIndex((entry) => entry.checkedOut?.branch === branch)
  return pooledAt >= 0 ? { pooled: pool.free.splice(pooledAt, 1)[0] } : {}
}

/** Every pooled worktree and retired branch of `runId` (in any repository), removed from the pool. */
export const drainPooled = (
  pools: Pools,
  runId: string
): { readonly worktrees: Array<Pooled>; readonly retired: Array<Retired> } => {
  const worktrees: Array<Pooled> = []
  const retired: Array<Retired> = []
  for (const [key, pool] of pools) {
    if (key.split("\0")[1] !== runId) continue
    worktrees.push(...pool.free)
    retired.push(...pool.retired)
    pools.delete(key)
    wake(pool)
  }
  return { worktrees, retired }
}
