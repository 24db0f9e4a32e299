/**
 * Who waits for whom among agents that hold keys and take more inside: the wait-for graph of an
 * in-memory lock table, used to fail a nested claim that would close a cycle instead of letting
 * every agent of the cycle wait for ever.
 */
import type { Holder, Lease } from "../ResourceLocks.ts"

/** One blocked nested request: the leases of the agents around it, and the key leases it waits for. */
export interface Wait {
  readonly holder: Holder
  readonly chain: ReadonlyArray<Lease>
  readonly blockers: ReadonlyArray<Edge>
}

/** A key `lease` holds that a waiting request needs. */
export interface Edge {
  readonly key: string
  readonly lease: Lease
}

/** One step of a cycle: `waiter` waits for `key`, held by `holder`. */
export interface Step {
  readonly waiter: Holder
  readonly key: string
  readonly holder: Holder
}

/**
 * The blocked nested requests of one lock table, indexed by each lease around them: an agent
 * holding lease `L` waits for every lease a request nested inside it waits for.
 */
export class WaitGraph {
  private readonly byLease = new Map<Lease, Set<Wait>>()

  /** How many waits the graph keeps. */
  get size(): number {
    const waits = new Set<Wait>()
    for (const set of this.byLease.values()) for (const wait of set) waits.add(wait)
    return waits.size
  }

  add(wait: Wait): void {
    for (const lease of wait.chain) {
      let set = this.byLease.get(lease)
      if (set === undefined) this.byLease.set(lease, (set = new Set()))
      set.add(wait)
    }
  }

  remove(wait: Wait): void {
    for (const lease of wait.chain) {
      const set = this.byLease.get(lease)
      if (set === undefined) continue
      set.delete(wait)
      if (set.size === 0) this.byLease.delete(lease)
    }
  }

  /**
   * The cycle `wait` would close: a path from a lease it waits for, through the leases the requests
   * nested in each holder wait for, back to a lease around `wait`. Only leases `live` says are still
   * held are followed.
   */
  cycle(wait: Wait, live: (lease: Lease) => boolean): Array<Step> | undefined {
    const targets = new Set(wait.chain)
    const seen = new Set<Lease>()
    const path: Array<{ readonly from: Lease | undefined; readonly edge: Edge }> = []
    const visit = (from: Lease | undefined, edges: ReadonlyArray<Edge>): Lease | undefined => {
      for (const edge of edges) {
        if (!live(edge.lease) || seen.has(edge.lease)) continue
        seen.add(edge.lease)
        path.push({ from, edge })
        if (targets.has(edge.lease)) return edge.lease
        for (const next of this.byLease.get(edge.lease) ?? []) {
          const end = visit(edge.lease, next.blockers)
          if (end !== undefined) return end
        }
        path.pop()
      }
      return undefined
    }
    const end = visit(undefined, wait.blockers)
    if (end === undefined) return undefined
    return path.map(({ from, edge }) => ({ waiter: (from ?? end).holder, key: edge.key, holder: edge.lease.holder }))
  }
}
