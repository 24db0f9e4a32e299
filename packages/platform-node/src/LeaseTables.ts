/**
 * What every `ResourceLocks` implementation over a database lease table shares (SQLite here, Postgres
 * in `@corral/postgres`): the lease timing options, the error of opening the table, and how a stored
 * lease row becomes a `ResourceLocks.Lease`. How leases conflict is `LeaseConflicts`.
 *
 * @since 0.1.0
 */
import type * as Claims from "@corral/core/Claims"
import * as DurationOption from "@corral/core/DurationOption"
import type * as ResourceLocks from "@corral/core/ResourceLocks"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Record from "effect/Record"
import * as Result from "effect/Result"
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
  /** How often held leases are renewed: shorter than `ttl` (keep it well below). @default "10 seconds" */
  readonly renewEvery?: Duration.Input | undefined
}

/**
 * A timing option a lock service cannot use: a duration that is not positive and finite (or that
 * `DurationOption` refuses), a `renewEvery` not shorter than `ttl` (leases would expire between
 * renewals), a `maxBypass` that is not a whole number of at least 0. Building the service dies with
 * it, naming the module and the option. `PostgresLocks` dies with it too (it shares this check);
 * `Workspace`'s lease timing and `Workspace.gc`'s `olderThan` die with it as well. (`PostgresLiveness`,
 * `Cluster` and `RunnerRegistry` die with `PostgresOptions.InvalidOption` instead.)
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  readonly module: string
  readonly option: string
  readonly reason: string
}> {
  override get message() {
    return `${this.module} ${this.option}: ${this.reason}`
  }
}

/**
 * The options' intervals in milliseconds (defaults filled in), or the first option it cannot use.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkTiming = (
  module: string,
  options: TimingOptions & { readonly pollEvery?: Duration.Input | undefined; readonly maxBypass?: number | undefined },
  defaultPollEvery: Duration.Input
): Effect.Effect<{ readonly ttl: number; readonly renewEvery: number; readonly pollEvery: number }> =>
  Effect.suspend(() => {
    const intervals = {
      ttl: DurationOption.intervalMillis(options.ttl ?? "30 seconds"),
      renewEvery: DurationOption.intervalMillis(options.renewEvery ?? "10 seconds"),
      pollEvery: DurationOption.intervalMillis(options.pollEvery ?? defaultPollEvery)
    }
    for (const [option, ms] of Object.entries(intervals))
      if (Result.isFailure(ms)) return Effect.die(new InvalidOption({ module, option, reason: ms.failure }))
    const { ttl, renewEvery, pollEvery } = Record.map(intervals, (ms) => Result.getOrThrow(ms))
    if (renewEvery >= ttl) {
      const reason = `must be shorter than ttl (${ttl} ms), got ${renewEvery} ms: leases would expire between renewals`
      return Effect.die(new InvalidOption({ module, option: "renewEvery", reason }))
    }
    const bypass = options.maxBypass
    if (
      bypass !== undefined &&
      !(bypass === Number.POSITIVE_INFINITY || (Number.isSafeInteger(bypass) && bypass >= 0))
    ) {
      const reason = `must be a whole number of at least 0 or Infinity, got ${bypass}`
      return Effect.die(new InvalidOption({ module, option: "maxBypass", reason }))
    }
    return Effect.succeed({ ttl, renewEvery, pollEvery })
  })

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
