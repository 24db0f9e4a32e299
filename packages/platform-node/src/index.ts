/**
 * @since 0.1.0
 */
export * as FakeModelServer from "./FakeModelServer.ts"
export * as Git from "./Git.ts"
export * as ProcessAgent from "./ProcessAgent.ts"
export * as ProcessRunner from "./ProcessRunner.ts"
export * as SqliteClient from "./SqliteClient.ts"
export * as Workspace from "./Workspace.ts"
export * as RemoteWorkspace from "./RemoteWorkspace.ts"
export * as RunLedger from "./RunLedger.ts"
export * as RunRecord from "./RunRecord.ts"
export * as RunRegistry from "./RunRegistry.ts"
export * as RunLiveness from "./RunLiveness.ts"
export * as SqliteLocks from "./SqliteLocks.ts"
export * as LeaseConflicts from "./LeaseConflicts.ts"
export * as LeaseTables from "./LeaseTables.ts"
export * as Sandbox from "./Sandbox.ts"
export * as SpawnHelper from "./SpawnHelper.ts"
