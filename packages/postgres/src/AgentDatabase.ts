/**
 * Per-agent Postgres schemas (`database: per-agent` with `CORRAL_POSTGRES_URL` set): each agent gets
 * a schema of its own, created before its command starts and dropped when its workspace is removed
 * (kept with a kept workspace, for inspection).
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { SqlError } from "effect/sql/SqlError"
import * as SqlClient from "effect/sql/SqlClient"

/**
 * The variable that configures Postgres for `database: per-agent`.
 *
 * @since 0.1.0
 * @category configuration
 */
export const urlVariable = "CORRAL_POSTGRES_URL"

/**
 * A schema name for an agent of a run: `corral_<run>_<agent>` in lower case with every other
 * character replaced by `_`, shortened with a hash to Postgres's 63 bytes.
 *
 * @since 0.1.0
 * @category naming
 */
export const schemaName = (runId: string, agentId: string): string => {
  const name = `corral_${runId}_${agentId}`.toLowerCase().replace(/[^a-z0-9_]/g, "_")
  if (name.length <= 63) return name
  const hash = createHash("sha256").update(`${runId}\0${agentId}`).digest("hex").slice(0, 10)
  return `${name.slice(0, 52)}_${hash}`
}

/**
 * The agent's connection settings: `DATABASE_URL` (the configured URL with `search_path` set to its
 * schema through the `options` parameter), `PGOPTIONS` for libpq clients such as `psql`, and
 * `CORRAL_AGENT_PG_SCHEMA`.
 *
 * @since 0.1.0
 * @category naming
 */
export const agentEnv = (url: string, schema: string): Record<string, string> => {
  const parsed = new URL(url)
  parsed.searchParams.delete("options")
  // libpq does not decode "+" as a space, so the value is percent-encoded by hand.
  const options = `options=${encodeURIComponent(`-c search_path=${schema}`)}`
  const query = parsed.search === "" ? `?${options}` : `${parsed.search}&${options}`
  parsed.search = ""
  const base = parsed.toString()
  const hash = parsed.hash
  return {
    DATABASE_URL: `${hash === "" ? base : base.slice(0, -hash.length)}${query}${hash}`,
    PGOPTIONS: `-c search_path=${schema}`,
    CORRAL_AGENT_PG_SCHEMA: schema
  }
}

// The Postgres driver is loaded only by runs that use it: importing it costs every `corral` start.
const withClient = <A>(url: string, use: (sql: SqlClient.SqlClient) => Effect.Effect<A, SqlError>) =>
  Effect.flatMap(
    Effect.promise(() => import("@effect/sql-pg")),
    ({ PgClient }) =>
      Effect.flatMap(SqlClient.SqlClient, use).pipe(
        Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))
      )
  )

const checked = (schema: string): string => {
  if (!/^[a-z0-9_]{1,63}$/.test(schema)) throw new Error(`not a schema name corral creates: ${schema}`)
  return schema
}

/**
 * Creates the agent's schema (failing when it exists: a schema is never shared by two agents).
 *
 * @since 0.1.0
 * @category schemas
 */
export const create = (url: string, schema: string): Effect.Effect<void, SqlError> =>
  withClient(url, (sql) => Effect.asVoid(sql.unsafe(`CREATE SCHEMA "${checked(schema)}"`)))

/**
 * Drops the agent's schema and everything in it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const drop = (url: string, schema: string): Effect.Effect<void, SqlError> =>
  withClient(url, (sql) => Effect.asVoid(sql.unsafe(`DROP SCHEMA IF EXISTS "${checked(schema)}" CASCADE`)))
