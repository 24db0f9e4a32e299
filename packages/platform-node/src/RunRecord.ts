/**
 * The read model of a recorded run: what a ledger returns for `corral status`, `corral report`
 * and resume. Every time is epoch milliseconds.
 *
 * @since 0.1.0
 */

/**
 * What an agent was doing during a stretch of time.
 *
 * @since 0.1.0
 * @category models
 */
export type SpanKind = "waiting-deps" | "waiting-claims" | "waiting-rate-limit" | "queued" | "running" | "merging"

/**
 * @since 0.1.0
 * @category models
 */
export interface Span {
  readonly kind: SpanKind
  readonly start: number
  readonly end: number
  /** e.g. "src/parser.ts held by parser" for waiting-claims, "attempt 2" for running */
  readonly note?: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface AgentRecord {
  readonly agentId: string
  readonly dependsOn: ReadonlyArray<string>
  /** Outcome tag (`Succeeded`, `Failed`, ...), `Cached` for a success reused from an earlier run, or null while unfinished. */
  readonly outcome: string | null
  /** Where the agent is now: `pending`, `queued`, `waiting` (claims or a rate limit), `running` or `done`. */
  readonly state?: "pending" | "queued" | "waiting" | "running" | "done" | undefined
  readonly detail: string
  readonly attempts: number
  readonly queuedAt: number | null
  readonly startedAt: number | null
  readonly endedAt: number | null
  readonly costUsd: number
  readonly tokens: number
  readonly idempotencyKey: string | null
  readonly branch: string | null
  readonly merge: string | null
  readonly logPath: string | null
  /** The value of a successful agent as recorded in the ledger (for `corral run`: its `AgentResult`). */
  readonly value?: unknown
  /**
   * The workspace folder of each attempt that got one, in order, as recorded by `AttemptWorkspace`
   * events (`{ agentId, attempt, dir }`); absent when none were recorded.
   */
  readonly workspaces?: ReadonlyArray<{ readonly attempt: number; readonly dir: string }> | undefined
  /** Failed attempts (retries) with their time and message. */
  readonly failures: ReadonlyArray<{ readonly at: number; readonly attempt: number; readonly message: string }>
  readonly spans: ReadonlyArray<Span>
}

/**
 * @since 0.1.0
 * @category models
 */
export type RunStatus = "running" | "succeeded" | "failed" | "interrupted" | "crashed" | "discarded"

/**
 * @since 0.1.0
 * @category models
 */
export interface RunRecord {
  readonly runId: string
  readonly planFile: string
  readonly planHash: string
  readonly status: RunStatus
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly endedAt: number | null
  /** Agent ids on the critical path (longest chain of dependent agents by measured duration). */
  readonly criticalPath: ReadonlyArray<string>
  /** Why the run was stopped early (`interrupted (Ctrl-C)`, `output closed`), when it was. */
  readonly stopReason?: string | undefined
  /**
   * The agents a cluster run's coordinator left running on its runners when it ended (its wait for
   * them ran out or was skipped: the `RunnersStillRunning` event), each with the address of the
   * runner that held it when known.
   */
  readonly leftRunning?: ReadonlyArray<{ readonly agentId: string; readonly runner: string | undefined }> | undefined
  readonly agents: ReadonlyArray<AgentRecord>
}
