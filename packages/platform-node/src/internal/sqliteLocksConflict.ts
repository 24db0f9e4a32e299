import type * as Claims from "@corral/core/Claims"
import type * as ResourceLocks from "@corral/core/ResourceLocks"

const overlaps = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false
  return true
}

const keyBlockers = (request: Claims.Request, lease: ResourceLocks.Lease): Array<ResourceLocks.Blocker> => {
  const found = new Map<string, ResourceLocks.Blocker>()
  for (const held of lease.request.keys) {
    for (const wanted of request.keys) {
      if (held.mode === "read" && wanted.mode === "read") continue
      if (!overlaps(held.segments, wanted.segments)) continue
      const key = held.segments.join("/")
      found.set(key, { _tag: "Key", key, mode: held.mode, holder: lease.holder, leaseId: lease.id })
    }
  }
  return [...found.values()]
}

const poolBlockers = (
  request: Claims.Request,
  leases: ReadonlyArray<ResourceLocks.Lease>
): Array<ResourceLocks.Blocker> =>
  request.pools.flatMap((claim) => {
    const holders = leases.filter((lease) => lease.request.pools.some((p) => p.pool === claim.pool))
    const used = holders.reduce((sum, lease) => sum + lease.request.pools.find((p) => p.pool === claim.pool)!.amount, 0)
    if (used + claim.amount <= claim.capacity) return []
    return [
      {
        _tag: "Pool" as const,
        pool: claim.pool,
        holders: holders.map((lease) => lease.holder),
        leaseIds: holders.map((lease) => lease.id)
      }
    ]
  })

/** Why `request` cannot be granted next to `leases`: overlapping keys where one side writes, full pools. */
export const blockersOf = (
  request: Claims.Request,
  leases: ReadonlyArray<ResourceLocks.Lease>
): Array<ResourceLocks.Blocker> => [
  ...leases.flatMap((lease) => keyBlockers(request, lease)),
  ...poolBlockers(request, leases)
]

/** What a lease holds, in the shape of `ResourceLocks.Snapshot.held`. */
export const heldClaims = (lease: ResourceLocks.Lease): Array<ResourceLocks.HeldClaim> => [
  ...lease.request.keys.map((claim) => ({ holder: lease.holder, key: claim.segments.join("/"), mode: claim.mode })),
  ...lease.request.pools.map((claim) => ({
    holder: lease.holder,
    key: `pool:${claim.pool}`,
    mode: "read" as const,
    amount: claim.amount
  }))
]
