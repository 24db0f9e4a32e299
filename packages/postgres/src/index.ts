/**
 * @since 0.1.0
 */
export * as PostgresClient from "./PostgresClient.ts"
export * as PostgresLedger from "./PostgresLedger.ts"
export * as PostgresLiveness from "./PostgresLiveness.ts"
export * as OwnerSession from "./OwnerSession.ts"
export * as PostgresLocks from "./PostgresLocks.ts"
export * as PostgresOptions from "./PostgresOptions.ts"
export * as TestServer from "./TestServer.ts"
export * as AgentDatabase from "./AgentDatabase.ts"
