/**
 * Worktrees of a run waiting to be reused by its next agent. `git clean -ffdx` has removed every
 * untracked and ignored file of a pooled worktree, so the next agent gets it with one `checkout -f -b`
 * of its own base (changed files only) instead of a full `worktree add`, and the run saves the
 * `worktree remove` of every agent but the last few.
 *
 * A worktree enters the pool either when its agent's workspace is released after the merge, or as
 * soon as the agent's work is committed (`recycleAfter`: "lent", so that the next agent does not
 * add a worktree while the merge runs at the repository root, which needs no worktree). Either way
 * the agent's branch may still be checked out in it, described by a {@link CheckedOut} shared by the
 * pool entry and the agent's release:
 *
 * | `state`    | set by                                      | the branch when it leaves the worktree (`left`) |
 * | ---------- | ------------------------------------------- | ----------------------------------------------- |
 * | `merging`  | the lend (commit done, merge not settled)   | nothing yet: the release settles it             |
 * | `merged`   | the release, after the merge (or at once)   | retired: deleted when the run ends              |
 * | `unmerged` | the release, after a conflict or a failure  | kept, or deleted by the release when it is in the base or the integration branch |
 *
 * The branch leaves the worktree when the next agent's checkout moves off it or the pooled worktree
 * is removed (`left`); a release that settles `merged` after that retires it then. A release that
 * settles `unmerged` while the worktree is still free takes it out of the pool, detaches it and puts
 * it back, so the branch is in no worktree. Only `merged` branches are reclaimed by a retry or
 * deleted at the run's end (one `update-ref --stdin` transaction, each deletion checked against its
 * merged tip). A run closes its pools (`closeRun`) once no agent of it will take a pooled worktree:
 * the free ones are removed then, and a worktree released later is removed instead of pooled. After a kill -9 in any state, `corral gc` finds a clean worktree of a dead run
 * (removed) and the agent's branch (deleted when merged, kept as "not merged" otherwise).
 *
 * A lent worktree, from its agent's commit until the next agent takes it:
 *
 * | phase        | counted in   | what runs                                                  | an acquire finding no free worktree |
 * | ------------ | ------------ | ---------------------------------------------------------- | ----------------------------------- |
 * | `committing` | `committing` | the agent's commit (`recycleAfter`'s `lastUse`)             | adds a spare, at most {@link maxSpares} per run; then waits |
 * | `lending`    | `pending`    | `status --ignored`, `clean -ffdx` when ignored files are left | waits                             |
 * | `free`       | `free`       | nothing: the agent's branch is still checked out              | takes it (`worktree move`, `checkout -f -b` of its base) |
 */
import * as Effect from "effect/Effect"

/** A merged agent's branch and the tip it was merged at. */
export interface MergedBranch {
  readonly branch: string
  readonly tip: string
}

/** An agent's branch checked out in a pooled worktree: see the table above. */
export interface CheckedOut {
  readonly branch: string
  /** The merged tip once `state` is `merged`. */
  tip: string
  state: "merging" | "merged" | "unmerged"
  /** Whether the worktree has left the branch (checked out another, or was removed). */
  left: boolean
  /** Whether the lend removed the worktree (the run's pools were closed) rather than pooling it. */
  removed: boolean
}

export interface Pooled {
  readonly dir: string
  /** The repository's root (where `git worktree remove` runs) and its git folder (for the repository lock). */
  readonly root: string
  readonly commonDir: string
  /** The agent branch still checked out in the worktree, if any. */
  readonly checkedOut?: CheckedOut | undefined
}

/** A merged branch no worktree has checked out any more, to delete when the run ends. */
export interface Retired extends MergedBranch {
  readonly root: string
}

interface Pool {
  readonly free: Array<Pooled>
  readonly retired: Array<Retired>
  /** Releases and lends under way that will free a worktree soon (a status, a clean). */
  pending: number
  /** Lends still waiting for their agent's commit (`lending`): a worktree, but not soon. */
  committing: number
  /** Worktrees added while only commits were pending (at most {@link maxSpares}). */
  spares: number
  readonly waiters: Array<() => void>
}

export interface Pools {
  readonly byKey: Map<string, Pool>
  /** Runs whose pools take no more worktrees (`closeRun`): what is released from then on is removed. */
  readonly closed: Set<string>
}

export const makePools = (): Pools => ({ byKey: new Map(), closed: new Set() })

const runIdOf = (key: string) => key.slice(key.indexOf("\0") + 1)

export const poolKey = (commonDir: string, runId: string) => `${commonDir}\0${runId}`

const poolOf = (pools: Pools, key: string): Pool => {
  const existing = pools.byKey.get(key)
  if (existing !== undefined) return existing
  const created: Pool = { free: [], retired: [], pending: 0, committing: 0, spares: 0, waiters: [] }
  pools.byKey.set(key, created)
  return created
}

const wake = (pool: Pool) => {
  for (const waiter of pool.waiters.splice(0)) waiter()
}

export const takePooled = (pools: Pools, key: string): Pooled | undefined => pools.byKey.get(key)?.free.pop()

/**
 * Notes that `pooled`'s branch is no longer checked out: a merged one is deleted when the run ends,
 * one still merging when its release settles it (`settleMerged`).
 */
export const retire = (pools: Pools, key: string, pooled: Pooled): void => {
  const checkedOut = pooled.checkedOut
  if (checkedOut === undefined || checkedOut.left) return
  checkedOut.left = true
  if (checkedOut.state === "merged") {
    poolOf(pools, key).retired.push({ branch: checkedOut.branch, tip: checkedOut.tip, root: pooled.root })
  }
}

/** A lent worktree's branch was merged at `tip`: retired now when the worktree has left it. */
export const settleMerged = (pools: Pools, key: string, root: string, checkedOut: CheckedOut, tip: string): void => {
  checkedOut.tip = tip
  checkedOut.state = "merged"
  if (checkedOut.left) poolOf(pools, key).retired.push({ branch: checkedOut.branch, tip, root })
}

/** Takes the free worktree that has `checkedOut` checked out out of the pool, if it is still free. */
export const takeHolding = (pools: Pools, key: string, checkedOut: CheckedOut): Pooled | undefined => {
  const free = pools.byKey.get(key)?.free
  const at = free?.findIndex((entry) => entry.checkedOut === checkedOut) ?? -1
  return at >= 0 ? free!.splice(at, 1)[0] : undefined
}

/**
 * How many worktrees a run adds while every worktree it could reuse is still waiting for its agent's
 * commit (see `awaitPooled`): 1, or `CORRAL_POOL_SPARES` (a whole number; 0 waits for the commit).
 */
export const maxSpares = ((raw) => (/^\d+$/.test(raw) ? Number(raw) : 1))(process.env.CORRAL_POOL_SPARES ?? "")

/**
 * Waits while no worktree is free but one will be soon: a release or a lend past its agent's commit
 * (a status, a clean) costs less than a `worktree add`. When every worktree that may
 * come back still waits for its agent's commit, the acquire adds one instead (`spare`), at most
 * {@link maxSpares} per run; beyond that it waits for the commits too.
 */
export const awaitPooled = (pools: Pools, key: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const pool = pools.byKey.get(key)
    if (pool === undefined || pool.free.length > 0 || pools.closed.has(runIdOf(key))) return Effect.void
    if (pool.pending === 0) {
      if (pool.committing === 0) return Effect.void
      if (pool.spares < maxSpares) {
        pool.spares++
        return Effect.void
      }
    }
    return Effect.callback<void>((resume) => {
      const waiter = () => resume(Effect.void)
      pool.waiters.push(waiter)
      return Effect.sync(() => {
        const index = pool.waiters.indexOf(waiter)
        if (index >= 0) pool.waiters.splice(index, 1)
      })
    }).pipe(Effect.andThen(awaitPooled(pools, key)))
  })

/** Marks a lend waiting for its agent's commit. */
export const markCommitting = (pools: Pools, key: string): void => {
  poolOf(pools, key).committing++
}

/** Ends what `markCommitting` began: the lend goes on (`markPending` first) or was given up. */
export const unmarkCommitting = (pools: Pools, key: string): void => {
  const pool = poolOf(pools, key)
  pool.committing--
  wake(pool)
}

/** Marks a release under way for `key` (an acquire waits for it rather than adding a worktree). */
export const markPending = (pools: Pools, key: string): void => {
  poolOf(pools, key).pending++
}

/** Ends what `markPending` began and wakes the waiters. */
export const unmarkPending = (pools: Pools, key: string): void => {
  const pool = poolOf(pools, key)
  pool.pending--
  wake(pool)
}

/** Marks a release under way for `key` until `effect` ends; waiters are woken then. */
export const releasing = <A, E, R>(pools: Pools, key: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => markPending(pools, key)),
    () => effect,
    () => Effect.sync(() => unmarkPending(pools, key))
  )

/**
 * Puts a free worktree in the pool; `false` when the run's pools are closed (`closeRun`): the caller
 * removes it instead.
 */
export const putPooled = (pools: Pools, key: string, entry: Pooled): boolean => {
  if (pools.closed.has(runIdOf(key))) return false
  const pool = poolOf(pools, key)
  pool.free.push(entry)
  wake(pool)
  return true
}

/** Whether the run's pools are closed (`closeRun`). */
export const runClosed = (pools: Pools, runId: string): boolean => pools.closed.has(runId)

/**
 * Closes the run's pools: no agent of the run will take a pooled worktree any more (a retried one
 * adds its own). Returns the free worktrees, taken out of the pools, for the caller to remove now
 * rather than when the run ends; waiters are woken (they add a worktree).
 */
export const closeRun = (pools: Pools, runId: string): Array<Pooled> => {
  pools.closed.add(runId)
  const free: Array<Pooled> = []
  for (const [key, pool] of pools.byKey) {
    if (runIdOf(key) !== runId) continue
    free.push(...pool.free.splice(0))
    wake(pool)
  }
  return free
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
  const pool = pools.byKey.get(key)
  if (pool === undefined) return {}
  const retiredAt = pool.retired.findIndex((entry) => entry.branch === branch)
  if (retiredAt >= 0) return { retired: pool.retired.splice(retiredAt, 1)[0] }
  const pooledAt = pool.free.findIndex(
    (entry) => entry.checkedOut?.branch === branch && entry.checkedOut.state === "merged"
  )
  return pooledAt >= 0 ? { pooled: pool.free.splice(pooledAt, 1)[0] } : {}
}

/** The retired branches of `runId` (in any repository), taken out of the pools for deletion now. */
export const takeRetired = (pools: Pools, runId: string): Array<Retired> => {
  const retired: Array<Retired> = []
  for (const [key, pool] of pools.byKey) if (runIdOf(key) === runId) retired.push(...pool.retired.splice(0))
  return retired
}

/** Every pooled worktree and retired branch of `runId` (in any repository), removed from the pool. */
export const drainPooled = (
  pools: Pools,
  runId: string
): { readonly worktrees: Array<Pooled>; readonly retired: Array<Retired> } => {
  const worktrees: Array<Pooled> = []
  const retired: Array<Retired> = []
  for (const [key, pool] of pools.byKey) {
    if (runIdOf(key) !== runId) continue
    worktrees.push(...pool.free)
    retired.push(...pool.retired)
    pools.byKey.delete(key)
    wake(pool)
  }
  pools.closed.delete(runId)
  return { worktrees, retired }
}
