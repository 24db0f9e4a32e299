/**
 * How leases of a lease table conflict, shared by every `ResourceLocks` implementation that keeps
 * its leases in a database (SQLite here, Postgres in `@corral/postgres`): overlapping keys where one
 * side writes, and pools whose capacity a request would exceed.
 *
 * @since 0.1.0
 */
import type * as Claims from "@corral/core/Claims"
import type * as ResourceLocks from "@corral/core/ResourceLocks"
import * as internal from "./internal/sqliteLocksConflict.ts"

/**
 * Why `request` cannot be granted next to `leases`, in the order of `leases`.
 *
 * @example
 * ```ts
 * import { Claims, type ResourceLocks } from "@corral/core"
 * import { LeaseConflicts } from "@corral/platform-node"
 * import { Result } from "effect"
 *
 * const writes = (keys: Array<string>) => Result.getOrThrow(Claims.normalize({ write: keys }, {}))
 * const liveLeases: Array<ResourceLocks.Lease> = [
 *   { id: 1, holder: { runId: "r1", agentId: "a" }, request: writes(["src/"]), fencingToken: 7 }
 * ]
 * const blockers = LeaseConflicts.blockersOf(writes(["src/a.ts"]), liveLeases)
 * // [{ _tag: "Key", key: "src", mode: "write", holder: { runId: "r1", agentId: "a" }, leaseId: 1 }]
 * const none = LeaseConflicts.blockersOf(writes(["docs/"]), liveLeases) // [] when it can be granted
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
 * import { Claims, type ResourceLocks } from "@corral/core"
 * import { LeaseConflicts } from "@corral/platform-node"
 * import { Result } from "effect"
 *
 * const writes = (keys: Array<string>) => Result.getOrThrow(Claims.normalize({ write: keys }, {}))
 * const liveLeases: Array<ResourceLocks.Lease> = [
 *   { id: 1, holder: { runId: "r1", agentId: "a" }, request: writes(["src/"]), fencingToken: 7 }
 * ]
 * const held = liveLeases.flatMap(LeaseConflicts.heldClaims)
 * // [{ holder: { runId: "r1", agentId: "a" }, key: "src", mode: "write" }]
 * ```
 * @since 0.1.0
 * @category conflicts
 */
export const heldClaims: (lease: ResourceLocks.Lease) => Array<ResourceLocks.HeldClaim> = internal.heldClaims
