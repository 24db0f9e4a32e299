/**
 * How leases of a lease table conflict, shared by every `ResourceLocks` implementation that keeps
 * its leases in a database (SQLite here, Postgres in `@corral/postgres`): overlapping keys where one
 * side writes, and pools whose capacity a request would exceed.
 *
 * @since 0.1.0
 */
import type { Claims, ResourceLocks } from "@corral/core"
import * as internal from "./internal/sqliteLocksConflict.ts"

/**
 * Why `request` cannot be granted next to `leases`, in the order of `leases`.
 *
 * @example
 * ```ts
 * const blockers = LeaseConflicts.blockersOf(request, liveLeases) // [] when it can be granted
 * ```
 * @since 0.1.0
 * @category conflicts
 */
export const blockersOf: (
  request: Claims.Request,
  leases: ReadonlyArray<ResourceLocks.Lease>
) => Array<ResourceLocks.Blocker> = internal.blockersOf

/**
 * What a lease holds, in the shape of `ResourceLocks.Snapshot.held`.
 *
 * @example
 * ```ts
 * const held = leases.flatMap(LeaseConflicts.heldClaims)
 * ```
 * @since 0.1.0
 * @category conflicts
 */
export const heldClaims: (lease: ResourceLocks.Lease) => Array<ResourceLocks.HeldClaim> = internal.heldClaims
