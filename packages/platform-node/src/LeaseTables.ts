/**
 * What every `ResourceLocks` implementation over a database lease table shares (SQLite here, Postgres
 * in `@corral/postgres`): the lease timing options, the error of opening the table, and how a stored
 * lease row becomes a `ResourceLocks.Lease`. How leases conflict is `LeaseConflicts`.
 *
 * @since 0.1.0
 */
import type * as Claims from "@corral/core/Claims"
import type * as ResourceLocks from "@corral/core/ResourceLocks"
import type * as Duration from "effect/Duration"
import type * as Migrator from "effect/sql/Migrator"
import type * as SqlError from "effect/sql/SqlError"

/**
 * The lease timing of a lease table.
 *
 * @since 0.1.0
 * @category models
 */
export interface TimingOptions {
  /** How long a lease outlives its last renewal. @default "30 seconds" */
  readonly ttl?: Duration.Input | undefined
  /** How often held leases are renewed; keep it well below `ttl`. @default "10 seconds" */
  readonly renewEvery?: Duration.Input | undefined
}

/**
 * Connecting to the database or migrating the lease table failed.
 *
 * @since 0.1.0
 * @category errors
 */
export type LocksError = SqlError.SqlError | Migrator.MigrationError

/**
 * The columns of a stored lease that make up the lease (drivers return `BIGINT`s as strings or numbers).
 *
 * @since 0.1.0
 * @category models
 */
export interface LeaseRow {
  readonly id: string | number
  readonly run_id: string
  readonly agent_id: string
  readonly fencing_token: string | number
  /** `JSON.stringify` of the request's `keys`. */
  readonly keys_json: string
  /** `JSON.stringify` of the request's `pools`. */
  readonly pools_json: string
}

/**
 * The lease a stored row holds.
 *
 * @example
 * ```ts
 * import { LeaseTables } from "@corral/platform-node"
 *
 * const lease = LeaseTables.leaseOfRow({
 *   id: "7", run_id: "r1", agent_id: "a", fencing_token: "42", keys_json: "[]", pools_json: "[]"
 * })
 * // { id: 7, holder: { runId: "r1", agentId: "a" }, fencingToken: 42, request: { keys: [], pools: [] } }
 * ```
 * @since 0.1.0
 * @category decoding
 */
export const leaseOfRow = (row: LeaseRow): ResourceLocks.Lease => ({
  id: Number(row.id),
  holder: { runId: row.run_id, agentId: row.agent_id },
  fencingToken: Number(row.fencing_token),
  request: { keys: JSON.parse(row.keys_json), pools: JSON.parse(row.pools_json) } as Claims.Request
})
