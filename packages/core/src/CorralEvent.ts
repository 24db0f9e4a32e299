/**
 * Events and progress of a run. Each event carries the progress snapshot after it, whose counts
 * always add up: `pending + running + done === total`.
 *
 * @since 0.1.0
 */
import type * as Outcome from "./Outcome.ts"
import type * as ResourceLocks from "./ResourceLocks.ts"

/**
 * Counts of agents by state. `waiting` (agents blocked on claims or rate limits) is part of `pending`; an agent
 * counts as `running` only once it holds a concurrency slot.
 *
 * @since 0.1.0
 * @category models
 */
export interface Progress {
  readonly total: number
  readonly pending: number
  readonly waiting: number
  readonly running: number
  readonly done: number
  readonly succeeded: number
  readonly failed: number
  readonly timedOut: number
  readonly interrupted: number
  readonly cancelled: number
  readonly skipped: number
}

interface Base {
  readonly runId: string
  readonly at: number
  readonly progress: Progress
}

/**
 * Why a run stopped before every agent ran.
 *
 * @since 0.1.0
 * @category models
 */
export type StopReason =
  | { readonly _tag: "AgentFailed"; readonly agentId: string; readonly outcome: Outcome.Tag }
  | {
      readonly _tag: "BudgetExceeded"
      readonly agentId: string
      readonly limit: string
      readonly spent: number
      readonly budget: number
    }
  | { readonly _tag: "Stopped"; readonly reason: string }

/**
 * @since 0.1.0
 * @category models
 */
export type CorralEvent =
  | (Base & { readonly _tag: "RunStarted"; readonly concurrency: number; readonly mode: "settle" | "fail-fast" })
  | (Base & { readonly _tag: "Queued"; readonly agentId: string })
  | (Base & {
      readonly _tag: "WaitingForClaims"
      readonly agentId: string
      readonly blockers: ReadonlyArray<ResourceLocks.Blocker>
    })
  | (Base & {
      readonly _tag: "WaitingForRateLimit"
      readonly agentId: string
      readonly key: string
      readonly ms: number
    })
  | (Base & { readonly _tag: "ClaimsAcquired"; readonly agentId: string; readonly fencingToken: number })
  | (Base & { readonly _tag: "Started"; readonly agentId: string })
  | (Base & { readonly _tag: "Retrying"; readonly agentId: string; readonly attempt: number })
  | (Base & { readonly _tag: "Finished"; readonly agentId: string; readonly outcome: Outcome.Outcome })
  | (Base & { readonly _tag: "Stopping"; readonly reason: StopReason })
  | (Base & { readonly _tag: "RunFinished"; readonly stopped: StopReason | undefined })
  | (Base & { readonly _tag: "EventsDropped"; readonly count: number })

/**
 * Describes a blocker for people: `src/parser.ts (write, held by parser)`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatBlocker = (blocker: ResourceLocks.Blocker): string =>
  blocker._tag === "Key"
    ? `${blocker.key} (${blocker.mode}, held by ${blocker.holder.agentId})`
    : `pool ${blocker.pool.slice(blocker.pool.indexOf("/") + 1)} (held by ${blocker.holders.map((h) => h.agentId).join(", ")})`
