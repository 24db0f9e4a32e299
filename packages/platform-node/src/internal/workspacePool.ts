/**
 * Worktrees of a run waiting to be reused by its next agent. A pooled worktree is detached, its
 * agent's branch is gone, and `git clean -ffdx` has removed every untracked and ignored file, so the
 * next agent gets it with one `checkout -f -b` of its own base (changed files only) instead of a full
 * `worktree add`, and the run saves the `worktree remove` of every agent but the last few.
 */
export interface Pooled {
  readonly dir: string
  /** The repository's root (where `git worktree remove` runs) and its git folder (for the repository lock). */
  readonly root: string
  readonly commonDir: string
}

export type Pools = Map<string, Array<Pooled>>

export const makePools = (): Pools => new Map()

export const poolKey = (commonDir: string, runId: string) => `${commonDir}\0${runId}`

export const takePooled = (pools: Pools, key: string): string | undefined => pools.get(key)?.pop()?.dir

export const putPooled = (pools: Pools, key: string, entry: Pooled): void => {
  const list = pools.get(key)
  if (list === undefined) pools.set(key, [entry])
  else list.push(entry)
}

/** Every pooled worktree of `runId` (in any repository), removed from the pool. */
export const drainPooled = (pools: Pools, runId: string): Array<Pooled> => {
  const drained: Array<Pooled> = []
  for (const [key, entries] of pools) {
    if (key.split("\0")[1] !== runId) continue
    drained.push(...entries)
    pools.delete(key)
  }
  return drained
}
