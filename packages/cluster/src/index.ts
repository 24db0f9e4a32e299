/**
 * @since 0.1.0
 */
export * as AgentEntity from "./AgentEntity.ts"
export * as Cluster from "./Cluster.ts"
