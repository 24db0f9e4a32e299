/**
 * The run ledger in Postgres: the same tables, migrations and behaviour as the SQLite ledger
 * (`RunLedger.layerSql` over a `PgClient`), so `corral runs|status|report` can read runs that
 * coordinators on other machines record. Costs are `DOUBLE PRECISION`.
 *
 * @since 0.1.0
 */
import { RunLedger } from "@corral/platform-node"
import * as Layer from "effect/Layer"
import * as PostgresClient from "./PostgresClient.ts"

/**
 * The ledger over its own pool to `url`.
 *
 * @example
 * ```ts
 * import { RunLedger } from "@corral/platform-node"
 * import { PostgresLedger } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const program = Effect.flatMap(RunLedger.RunLedger, (ledger) => ledger.getRun("r1"))
 * Effect.provide(program, PostgresLedger.layer("postgres://postgres@127.0.0.1:5432/corral"))
 * ```
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  url: string,
  options?: RunLedger.WriterOptions & PostgresClient.Options
): Layer.Layer<RunLedger.RunLedger, RunLedger.RunLedgerError | PostgresClient.PostgresUnavailable> =>
  RunLedger.layerSql(options).pipe(Layer.provide(PostgresClient.layer(url, options)))
