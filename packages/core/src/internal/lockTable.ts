import type * as Claims from "../Claims.ts"
import type { Attempt, Blocker, HeldClaim, Holder, Lease } from "../ResourceLocks.ts"
import { KeyTree } from "./keyTree.ts"

interface PoolState {
  used: number
  readonly holders: Set<Lease>
}

export interface Waiter {
  readonly holder: Holder
  readonly request: Claims.Request
  readonly grant: (lease: Lease) => void
}

/**
 * The table behind each in-memory lock service (see `ResourceLocks.makeMemory`): a run whose lock
 * service is one takes and releases its leases with synchronous calls on the table (every operation
 * of that service is one synchronous step anyway), without an effect per agent.
 */
export const memoryTables = new WeakMap<object, LockTable>()

export class LockTable {
  private readonly keys = new KeyTree<Lease>()
  private readonly pools = new Map<string, PoolState>()
  private readonly leases = new Set<Lease>()
  private readonly waiters: Array<Waiter> = []
  private readonly listeners = new Set<(lease: Lease) => void>()
  private nextId = 1
  private nextFence = 1

  tryAcquire(holder: Holder, request: Claims.Request): Attempt {
    if (!this.isFree(request)) return { _tag: "Blocked", blockers: this.blockers(request) }
    return { _tag: "Acquired", lease: this.grant(holder, request) }
  }

  isFree(request: Claims.Request): boolean {
    if (this.keys.hasConflict(request.keys)) return false
    for (const claim of request.pools) {
      if ((this.pools.get(claim.pool)?.used ?? 0) + claim.amount > claim.capacity) return false
    }
    return true
  }

  blockers(request: Claims.Request): Array<Blocker> {
    const blockers: Array<Blocker> = []
    for (const hit of this.keys.conflicts(request.keys)) {
      blockers.push({ _tag: "Key", key: hit.key, mode: hit.mode, holder: hit.holder.holder, leaseId: hit.holder.id })
    }
    for (const claim of request.pools) {
      const state = this.pools.get(claim.pool)
      if (state !== undefined && state.used + claim.amount > claim.capacity) {
        const holders = [...state.holders]
        blockers.push({
          _tag: "Pool",
          pool: claim.pool,
          holders: holders.map((lease) => lease.holder),
          leaseIds: holders.map((lease) => lease.id)
        })
      }
    }
    return blockers
  }

  /** The leases whose keys block `request`, with the key each holds. */
  keyBlockers(request: Claims.Request): Array<{ readonly key: string; readonly lease: Lease }> {
    return this.keys.conflicts(request.keys).map((hit) => ({ key: hit.key, lease: hit.holder }))
  }

  /** Whether `lease` is granted and not yet released. */
  holds(lease: Lease): boolean {
    return this.leases.has(lease)
  }

  release(lease: Lease): void {
    if (!this.leases.delete(lease)) return
    this.keys.remove(lease, lease.request.keys)
    for (const claim of lease.request.pools) {
      const state = this.pools.get(claim.pool)
      if (state === undefined) continue
      state.used -= claim.amount
      state.holders.delete(lease)
      if (state.used === 0) this.pools.delete(claim.pool)
    }
    this.serveWaiters()
    for (const listener of this.listeners) listener(lease)
  }

  enqueue(waiter: Waiter): void {
    this.waiters.push(waiter)
    this.serveWaiters()
  }

  dequeue(waiter: Waiter): void {
    const index = this.waiters.indexOf(waiter)
    if (index >= 0) this.waiters.splice(index, 1)
  }

  subscribe(listener: (lease: Lease) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  held(): Array<HeldClaim> {
    const out: Array<HeldClaim> = this.keys
      .entries()
      .map((hit) => ({ holder: hit.holder.holder, key: hit.key, mode: hit.mode }))
    for (const [pool, state] of this.pools) {
      for (const lease of state.holders) {
        const amount = lease.request.pools.find((claim) => claim.pool === pool)?.amount ?? 0
        out.push({ holder: lease.holder, key: `pool:${pool}`, mode: "read", amount })
      }
    }
    return out
  }

  waiting(): Array<{ readonly holder: Holder; readonly request: Claims.Request }> {
    return this.waiters.map(({ holder, request }) => ({ holder, request }))
  }

  get leaseCount(): number {
    return this.leases.size
  }

  private grant(holder: Holder, request: Claims.Request): Lease {
    const lease: Lease = { id: this.nextId++, holder, request, fencingToken: this.nextFence++ }
    this.leases.add(lease)
    this.keys.add(lease, request.keys)
    for (const claim of request.pools) {
      let state = this.pools.get(claim.pool)
      if (state === undefined) {
        state = { used: 0, holders: new Set() }
        this.pools.set(claim.pool, state)
      }
      state.used += claim.amount
      state.holders.add(lease)
    }
    return lease
  }

  private serveWaiters(): void {
    if (this.waiters.length === 0) return
    const ahead = new KeyTree<Waiter>()
    const poolsAhead = new Set<string>()
    for (let i = 0; i < this.waiters.length; i++) {
      const waiter = this.waiters[i]!
      const behind = ahead.hasConflict(waiter.request.keys) || waiter.request.pools.some((p) => poolsAhead.has(p.pool))
      if (!behind && this.isFree(waiter.request)) {
        this.waiters.splice(i--, 1)
        waiter.grant(this.grant(waiter.holder, waiter.request))
        continue
      }
      ahead.add(waiter, waiter.request.keys)
      for (const claim of waiter.request.pools) poolsAhead.add(claim.pool)
    }
  }
}
