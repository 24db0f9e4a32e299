/**
 * Per-agent Postgres schemas (`database: per-agent` with `CORRAL_POSTGRES_URL` set): the CLI's name
 * for `@corral/postgres/AgentDatabase`, which runners of a cluster use too.
 *
 * @since 0.1.0
 */
export * from "@corral/postgres/AgentDatabase"
