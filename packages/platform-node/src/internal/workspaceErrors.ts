import * as Data from "effect/Data"
import type { GitFailure } from "./git.ts"

export class NotAGitRepository extends Data.TaggedError("NotAGitRepository")<{ readonly path: string }> {
  override get message() {
    return `${this.path} is not inside a git repository with at least one commit; use strategy "directory" or "none", or run git init and commit`
  }
}

export class BranchAlreadyExists extends Data.TaggedError("BranchAlreadyExists")<{
  readonly repo: string
  readonly branch: string
  readonly agentId?: string | undefined
}> {
  override get message() {
    const who = this.agentId === undefined ? "" : ` for agent ${this.agentId}`
    return `branch ${this.branch} already exists in ${this.repo}${who}; choose another run id or run gc to clean up a dead run`
  }
}

export class InvalidWorkspaceId extends Data.TaggedError("InvalidWorkspaceId")<{
  readonly field: "runId" | "agentId" | "folder"
  readonly value: string
  readonly reason: string
}> {
  override get message() {
    return `invalid ${this.field} ${JSON.stringify(this.value)}: ${this.reason}`
  }
}

export class InvalidSparseFolder extends Data.TaggedError("InvalidSparseFolder")<{
  readonly agentId: string
  readonly folder: string
  readonly reason: string
}> {
  override get message() {
    return `agent ${this.agentId}: invalid sparse folder ${JSON.stringify(this.folder)}: ${this.reason}`
  }
}

export class WorkspaceIoError extends Data.TaggedError("WorkspaceIoError")<{
  readonly path: string
  readonly operation: string
  readonly cause: unknown
}> {
  override get message() {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `could not ${this.operation} ${this.path}: ${reason}`
  }
}

export class PortsExhausted extends Data.TaggedError("PortsExhausted")<{
  readonly agentId: string
  readonly blocks: number
}> {
  override get message() {
    return `no free port block for agent ${this.agentId}: all ${this.blocks} blocks are held by live agents`
  }
}

export class IntegrationMoved extends Data.TaggedError("IntegrationMoved")<{
  readonly repo: string
  readonly branch: string
  readonly expected: string
}> {
  override get message() {
    return `integration branch ${this.branch} in ${this.repo} moved away from ${this.expected} while merging; another process updated it`
  }
}

export class UnsupportedStrategy extends Data.TaggedError("UnsupportedStrategy")<{
  readonly agentId: string
  readonly strategy: string
  readonly operation: string
}> {
  override get message() {
    return `cannot ${this.operation} for agent ${this.agentId}: it needs a "worktree" workspace, not "${this.strategy}"`
  }
}

export type WorkspaceError =
  | GitFailure
  | NotAGitRepository
  | BranchAlreadyExists
  | InvalidWorkspaceId
  | InvalidSparseFolder
  | WorkspaceIoError
  | PortsExhausted
  | IntegrationMoved
  | UnsupportedStrategy
  | OverlayUnavailable

export class OverlayUnavailable extends Data.TaggedError("OverlayUnavailable")<{
  readonly agentId: string
  readonly reason: string
}> {
  override get message() {
    return `agent ${this.agentId}: an overlay workspace cannot be mounted on this machine: ${this.reason}`
  }
}
