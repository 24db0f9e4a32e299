/**
 * The live view of a run: a model updated by events, rendered as rows on a terminal or as plain
 * lines when output is not a terminal. Rendering is pure, so it is tested without a terminal.
 *
 * @since 0.1.0
 */
import * as CorralEvent from "@corral/core/CorralEvent"
import type * as Outcome from "@corral/core/Outcome"
import * as OutcomeText from "./OutcomeText.ts"
import type { RunEvent } from "./RunEvent.ts"
import * as TerminalText from "./TerminalText.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Row {
  readonly id: string
  state: string
  startedAt: number | undefined
  endedAt: number | undefined
  attempt: number
  waitingFor: string | undefined
  lastLine: string | undefined
  /** Why a finished agent did not succeed. */
  reason: string | undefined
  dependsOn: ReadonlyArray<string>
  /** Cost reported by the running attempt so far (`Usage` events), until it finishes. */
  liveCostUsd: number
}

/**
 * @since 0.1.0
 * @category models
 */
export class ViewState {
  readonly rows = new Map<string, Row>()
  progress: CorralEvent.Progress | undefined = undefined
  startedAt: number | undefined = undefined
  costUsd = 0
  readonly notices: Array<string> = []

  constructor(agents: ReadonlyArray<{ readonly id: string; readonly dependsOn: ReadonlyArray<string> }>) {
    for (const agent of agents) {
      this.rows.set(agent.id, {
        id: agent.id,
        state: "pending",
        startedAt: undefined,
        endedAt: undefined,
        attempt: 0,
        waitingFor: agent.dependsOn.length > 0 ? `after ${agent.dependsOn.join(", ")}` : undefined,
        lastLine: undefined,
        reason: undefined,
        dependsOn: agent.dependsOn,
        liveCostUsd: 0
      })
    }
  }

  apply(event: RunEvent): void {
    if ("progress" in event) this.progress = event.progress
    const row = "agentId" in event ? this.rows.get(event.agentId) : undefined
    switch (event._tag) {
      case "RunStarted":
        this.startedAt = event.at
        return
      case "WaitingForClaims":
        if (row === undefined) return
        row.state = "waiting"
        row.waitingFor = `for ${event.blockers.map(CorralEvent.formatBlocker).join(", ")}`
        return
      case "WaitingForRateLimit":
        if (row === undefined) return
        row.state = "waiting"
        row.waitingFor = `for rate limit ${event.key} (~${seconds(event.ms)})`
        return
      case "Started":
        if (row === undefined) return
        row.state = "running"
        row.startedAt = event.at
        row.attempt = Math.max(row.attempt, 1)
        row.waitingFor = undefined
        return
      case "Retrying":
        if (row !== undefined) row.attempt = event.attempt
        return
      case "Finished":
        if (row === undefined) return
        row.state = outcomeState(event.outcome)
        row.endedAt = event.at
        row.waitingFor = undefined
        row.reason = event.outcome._tag === "Succeeded" ? undefined : OutcomeText.detail(event.outcome)
        this.costUsd += event.outcome.usage.costUsd - row.liveCostUsd
        row.liveCostUsd = 0
        return
      case "Usage":
        if (row === undefined || row.endedAt !== undefined) return
        row.liveCostUsd += event.usage.costUsd
        this.costUsd += event.usage.costUsd
        return
      case "Output": {
        const text = TerminalText.clean(event.text)
        if (row !== undefined && text.length > 0) row.lastLine = text
        return
      }
      case "MergeConflict":
        if (row !== undefined) row.reason = `merge conflict in ${event.paths.join(", ")}`
        this.notices.push(`${event.agentId}: merge conflict in ${event.paths.join(", ")} (branch ${event.branch} kept)`)
        return
      case "ConflictPredicted":
        this.notices.push(conflictWarning(event.agents, event.paths))
        return
      case "Notice":
        this.notices.push(event.message)
        return
      default:
        return
    }
  }
}

const outcomeState = (outcome: Outcome.Outcome): string => OutcomeText.word(OutcomeText.tagOf(outcome))

const conflictWarning = (agents: ReadonlyArray<string>, paths: ReadonlyArray<string>): string =>
  `${agents.join(" and ")} are likely to conflict in ${paths.join(", ")}`

const symbols: Record<string, string> = {
  pending: "·",
  waiting: "⏸",
  running: "▶",
  succeeded: "✓",
  cached: "✓",
  failed: "✗",
  "timed out": "⏱",
  "claim timed out": "⏱",
  interrupted: "■",
  cancelled: "○",
  skipped: "↷"
}

const seconds = OutcomeText.seconds

const elapsed = (row: Row, now: number): string => {
  if (row.startedAt === undefined) return ""
  return seconds((row.endedAt ?? now) - row.startedAt)
}

const fit = TerminalText.fit

/**
 * Renders the rows and a summary line for a terminal `columns` wide.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderTty = (view: ViewState, now: number, columns: number): string => {
  const idWidth = Math.min(24, Math.max(5, ...[...view.rows.keys()].map((id) => id.length)))
  const lines: Array<string> = []
  for (const row of view.rows.values()) {
    const head = `${symbols[row.state] ?? "?"} ${fit(row.id, idWidth).padEnd(idWidth)} ${row.state.padEnd(15)} ${elapsed(row, now).padStart(7)}${row.attempt > 1 ? ` #${row.attempt}` : "   "}`
    const detail =
      row.state === "waiting" || row.state === "pending"
        ? (row.waitingFor ?? "")
        : row.state === "running"
          ? (row.lastLine ?? "")
          : (row.reason ?? row.lastLine ?? "")
    lines.push(fit(detail.length > 0 ? `${head}  ${detail}` : head, columns))
  }
  lines.push("")
  lines.push(fit(summaryLine(view, now), columns))
  for (const notice of view.notices.slice(-3)) lines.push(fit(`! ${notice}`, columns))
  return lines.join("\n")
}

/**
 * `3 running · 2 waiting · 4 pending · 5/14 done · 12.4s · $0.031`
 *
 * @since 0.1.0
 * @category rendering
 */
export const summaryLine = (view: ViewState, now: number): string => {
  const p = view.progress
  if (p === undefined) return "starting…"
  const parts = [
    `${p.running} running`,
    `${p.waiting} waiting`,
    `${p.pending - p.waiting} pending`,
    `${p.done}/${p.total} done`,
    view.startedAt === undefined ? "" : seconds(now - view.startedAt),
    view.costUsd > 0 ? `$${view.costUsd.toFixed(3)}` : ""
  ]
  return parts.filter((part) => part.length > 0).join(" · ")
}

/**
 * The line printed for an event when output is not a terminal, or `undefined` for events that
 * change no state worth a line.
 *
 * @since 0.1.0
 * @category rendering
 */
export const plainLine = (event: RunEvent, startedAt: number): string | undefined => {
  const t = `[${seconds(event.at - startedAt).padStart(7)}]`
  switch (event._tag) {
    case "Started":
      return `${t} ${event.agentId}: started`
    case "WaitingForClaims":
      return `${t} ${event.agentId}: waiting for ${event.blockers.map(CorralEvent.formatBlocker).join(", ")}`
    case "WaitingForRateLimit":
      return `${t} ${event.agentId}: waiting for rate limit ${event.key} (~${seconds(event.ms)})`
    case "Retrying":
      return `${t} ${event.agentId}: retrying (attempt ${event.attempt})`
    case "Finished":
      return `${t} ${event.agentId}: ${OutcomeText.describe(event.outcome)}`
    case "Merged":
      return `${t} ${event.agentId}: merged (${event.commit.slice(0, 10)})`
    case "MergeConflict":
      return `${t} ${event.agentId}: merge conflict in ${event.paths.join(", ")}; branch ${event.branch} kept`
    case "ConflictPredicted":
      return `${t} warning: ${conflictWarning(event.agents, event.paths)}`
    case "WorkspaceKept":
      return `${t} ${event.agentId}: workspace kept at ${event.path} (${event.reason})`
    case "Stopping":
      return `${t} stopping: ${stopText(event.reason)}`
    case "Notice":
      return `${t} ${event.message}`
    default:
      return undefined
  }
}

/**
 * @since 0.1.0
 * @category rendering
 */
export const stopText = (reason: CorralEvent.StopReason): string => {
  switch (reason._tag) {
    case "AgentFailed":
      return `${reason.agentId} ${OutcomeText.word(reason.outcome)} (fail-fast)`
    case "BudgetExceeded":
      return `${reason.limit} budget ${reason.budget} exceeded by ${reason.agentId}`
    case "Stopped":
      return reason.reason
  }
}
