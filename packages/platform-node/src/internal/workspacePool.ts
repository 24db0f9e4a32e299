/**
 * Worktrees of a run waiting to be reused by its next agent. A pooled worktree is detached, its
 * agent's branch is gone, and `git clean -ffdx` has removed every untracked and ignored file, so the
 * next agent gets it with one `checkout -f -b` of its own base (changed files only) instead of a full
 * `worktree add`, and the run saves the `worktree remove` of every agent but the last few.
 */
import * as Effect from "effect/Effect"

export interface Pooled {
  readonly dir: string
  /** The repository's root (where `git worktree remove` runs) and its git folder (for the repository lock). */
  readonly root: string
  readonly commonDir: string
}

interface Pool {
  readonly free: Array<Pooled>
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
  const created: Pool = { free: [], pending: 0, waiters: [] }
  pools.set(key, created)
  return created
}

const wake = (pool: Pool) => {
  for (const waiter of pool.waiters.splice(0)) waiter()
}

export const takePooled = (pools: Pools, key: string): string | undefined => pools.get(key)?.free.pop()?.dir

/**
 * Waits while no worktree is free but a release that may free one is under way: recycling one
 * (a status, a detach and a clean) costs less than a new `worktree add`.
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

/** Every pooled worktree of `runId` (in any repository), removed from the pool. */
export const drainPooled = (pools: Pools, runId: string): Array<Pooled> => {
  const drained: Array<Pooled> = []
  for (const [key, pool] of pools) {
    if (key.split("\0")[1] !== runId) continue
    drained.push(...pool.free)
    pools.delete(key)
    wake(pool)
  }
  return drained
}
