/**
 * Events of a `corral run`: the core's run events plus what the command adds (process output,
 * merges, predicted conflicts, kept workspaces). `--json` prints one per line.
 *
 * @since 0.1.0
 */
import type * as CorralEvent from "@corral/core/CorralEvent"

/**
 * @since 0.1.0
 * @category models
 */
export type CommandEvent =
  | {
      readonly _tag: "Output"
      readonly at: number
      readonly agentId: string
      readonly stream: "stdout" | "stderr"
      readonly text: string
    }
  | { readonly _tag: "Merged"; readonly at: number; readonly agentId: string; readonly commit: string }
  | { readonly _tag: "NothingToMerge"; readonly at: number; readonly agentId: string }
  /** The agent's command ended: its slot went to the next agent; its commit and merge go on under its claims. */
  | { readonly _tag: "SlotReleased"; readonly at: number; readonly agentId: string }
  | {
      readonly _tag: "MergeConflict"
      readonly at: number
      readonly agentId: string
      readonly branch: string
      readonly paths: ReadonlyArray<string>
    }
  | {
      readonly _tag: "ConflictPredicted"
      readonly at: number
      readonly agents: ReadonlyArray<string>
      readonly paths: ReadonlyArray<string>
    }
  | {
      readonly _tag: "WorkspaceKept"
      readonly at: number
      readonly agentId: string
      readonly path: string
      readonly reason: string
    }
  | { readonly _tag: "Notice"; readonly at: number; readonly message: string }
  | {
      readonly _tag: "Usage"
      readonly at: number
      readonly agentId: string
      readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly costUsd: number }
    }

/**
 * @since 0.1.0
 * @category models
 */
export type RunEvent = CorralEvent.CorralEvent | CommandEvent

const jsonSafe = (value: unknown): unknown => {
  if (value instanceof Error) return { name: value.name, message: value.message }
  if (typeof value === "bigint") return value.toString()
  return value
}

/**
 * One NDJSON line: `{"type": "<tag>", ...fields}`; outcomes are flattened to their fields, errors
 * with a `toJSON` (effect's tagged errors, such as `ProcessFailed`) to what it gives, other errors to
 * `{ name, message }`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const toJsonLine = (event: RunEvent): string => {
  const { _tag, ...fields } = event as { _tag: string } & Record<string, unknown>
  const body: Record<string, unknown> = { type: _tag, ...fields }
  if (event._tag === "Finished") {
    const { _tag: outcome, ...rest } = event.outcome as unknown as { _tag: string } & Record<string, unknown>
    body.outcome = { type: outcome, ...rest }
  }
  return JSON.stringify(body, (_key, value) => jsonSafe(value))
}
