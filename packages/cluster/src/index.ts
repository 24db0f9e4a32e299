/**
 * @since 0.1.0
 */
export * as AgentEntity from "./AgentEntity.ts"
export * as AgentOutput from "./AgentOutput.ts"
export * as Cluster from "./Cluster.ts"
export * as ProcessKind from "./ProcessKind.ts"
export * as Runner from "./Runner.ts"
export * as RunnerLabels from "./RunnerLabels.ts"
export * as RunnerRegistry from "./RunnerRegistry.ts"
