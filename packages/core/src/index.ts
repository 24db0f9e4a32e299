/**
 * @since 0.1.0
 */
export * as Agent from "./Agent.ts"
export * as Claims from "./Claims.ts"
export * as Corral from "./Corral.ts"
export * as CorralError from "./CorralError.ts"
export * as CorralEvent from "./CorralEvent.ts"
export * as Ledger from "./Ledger.ts"
export * as Llm from "./Llm.ts"
export * as Outcome from "./Outcome.ts"
export * as Plan from "./Plan.ts"
export * as RateLimiter from "./RateLimiter.ts"
export * as ResourceLocks from "./ResourceLocks.ts"
export * as RunResult from "./RunResult.ts"
export * as Usage from "./Usage.ts"
export * as ToolCalls from "./ToolCalls.ts"
export * as VersionedCell from "./VersionedCell.ts"
