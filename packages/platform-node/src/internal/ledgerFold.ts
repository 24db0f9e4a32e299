import * as CorralEvent from "@corral/core/CorralEvent"
import type * as Outcome from "@corral/core/Outcome"
import type { LedgerEvent } from "../RunLedger.ts"
import type * as RunRecord from "../RunRecord.ts"
import {
  type AgentRow,
  encodeValue,
  field,
  type RunUpdate,
  type SuccessRow,
  type TransitionRow
} from "./ledgerModel.ts"

export interface Folded {
  readonly agent: AgentRow | undefined
  readonly transition: TransitionRow
  readonly success: SuccessRow | undefined
  readonly run: RunUpdate | undefined
}

type Known = CorralEvent.CorralEvent
type AgentEvent = Extract<Known, { readonly agentId: string }>

const stringField = (event: LedgerEvent, name: string): string | undefined => {
  const value = field(event, name)
  return typeof value === "string" ? value : undefined
}

const mergeTags: Readonly<Record<string, string>> = {
  Merged: "merged",
  MergeConflict: "conflict",
  NothingToMerge: "nothing"
}

export const newAgentRow = (
  runId: string,
  agentId: string,
  position: number,
  dependsOn: ReadonlyArray<string> = [],
  idempotencyKey: string | null = null
): AgentRow => ({
  runId,
  agentId,
  position,
  dependsOn: dependsOn.length === 0 ? "[]" : JSON.stringify(dependsOn),
  idempotencyKey,
  state: "pending",
  attempts: 0,
  outcome: null,
  detail: "",
  queuedAt: null,
  startedAt: null,
  endedAt: null,
  costUsd: 0,
  tokens: 0,
  branch: null,
  merge: null,
  logPath: null,
  valueJson: null
})

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`

/** The detail recorded with an outcome, worded as the command words it everywhere (`after 3.0s`). */
export const outcomeDetail = (outcome: Outcome.Outcome): string => {
  switch (outcome._tag) {
    case "Succeeded":
      return ""
    case "Failed":
      return outcome.message
    case "TimedOut":
      return `after ${seconds(outcome.afterMs)}`
    case "Interrupted":
    case "Cancelled":
      return outcome.reason
    case "Skipped":
      return `${outcome.dependency} ${outcome.dependencyOutcome.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase()}`
    case "ClaimTimedOut":
      return `after ${seconds(outcome.afterMs)} waiting for ${outcome.blockers.map((b) => `${b.key} held by ${b.holder}`).join(", ")}`
  }
}

const finished = (agent: AgentRow, outcome: Outcome.Outcome, at: number): AgentRow => ({
  ...agent,
  state: "done",
  outcome: outcome._tag === "Succeeded" && outcome.cached ? "Cached" : outcome._tag,
  detail: outcomeDetail(outcome),
  attempts: outcome.attempts,
  queuedAt: agent.queuedAt ?? outcome.queuedAt,
  startedAt: outcome.startedAt ?? agent.startedAt,
  endedAt: outcome.endedAt ?? at,
  costUsd: outcome.usage.costUsd,
  tokens: outcome.usage.inputTokens + outcome.usage.outputTokens,
  valueJson: outcome._tag === "Succeeded" ? encodeValue(outcome.value) : null
})

const stepAgent = (agent: AgentRow, event: AgentEvent): AgentRow => {
  switch (event._tag) {
    case "Queued":
      return { ...agent, state: "queued", queuedAt: event.at }
    case "WaitingForClaims":
    case "WaitingForRateLimit":
    case "ClaimsAcquired":
      return { ...agent, state: "waiting" }
    case "Started":
      return { ...agent, state: "running", startedAt: event.at, attempts: Math.max(1, agent.attempts) }
    case "Retrying":
      return { ...agent, state: "running", attempts: event.attempt }
    case "Finished":
      return finished(agent, event.outcome, event.at)
  }
}

const noteOf = (event: LedgerEvent): string | null => {
  const e = event as Known
  switch (e._tag) {
    case "WaitingForClaims":
      return e.blockers.map(CorralEvent.formatBlocker).join(", ")
    case "WaitingForRateLimit":
      return e.key
    case "Retrying":
      return `attempt ${e.attempt}`
    case "Finished":
      return e.outcome._tag
    case "Stopping":
      return e.reason._tag
    default:
      return stringField(event, "message") ?? null
  }
}

const isOmitted = (key: string): boolean => {
  switch (key) {
    case "_tag":
    case "runId":
    case "agentId":
    case "at":
    case "progress":
    case "outcome":
    case "blockers":
      return true
    default:
      return false
  }
}

const dataOf = (event: LedgerEvent): string | null => {
  let rest: Record<string, unknown> | undefined
  for (const key in event) {
    if (isOmitted(key) || !Object.hasOwn(event, key)) continue
    const value = field(event, key)
    if (value !== undefined) (rest ??= {})[key] = value
  }
  if (rest === undefined) return null
  try {
    return JSON.stringify(rest)
  } catch {
    return null
  }
}

const knownAgentEvents: ReadonlySet<string> = new Set([
  "Queued",
  "WaitingForClaims",
  "WaitingForRateLimit",
  "ClaimsAcquired",
  "Started",
  "Retrying",
  "Finished"
])

const isKnownAgentEvent = (event: LedgerEvent): event is AgentEvent => knownAgentEvents.has(event._tag)

const annotate = (agent: AgentRow, event: LedgerEvent): AgentRow => {
  const merge = mergeTags[event._tag]
  const branch = stringField(event, "branch") ?? agent.branch
  const logPath = stringField(event, "logPath") ?? agent.logPath
  return { ...agent, branch, logPath, merge: merge ?? agent.merge }
}

const runStatusOf = (event: Extract<Known, { _tag: "RunFinished" }>): RunRecord.RunStatus => {
  if (event.stopped?._tag === "Stopped") return "interrupted"
  if (event.stopped !== undefined) return "failed"
  return event.progress.succeeded === event.progress.total ? "succeeded" : "failed"
}

const runUpdateOf = (runId: string, event: LedgerEvent): RunUpdate | undefined =>
  event._tag === "RunFinished"
    ? { runId, status: runStatusOf(event as Extract<Known, { _tag: "RunFinished" }>), endedAt: event.at }
    : undefined

const successOf = (runId: string, event: LedgerEvent, agent: AgentRow | undefined): SuccessRow | undefined => {
  if (event._tag !== "Finished" || agent === undefined || agent.idempotencyKey === null) return undefined
  const outcome = (event as Extract<Known, { _tag: "Finished" }>).outcome
  if (outcome._tag !== "Succeeded" || outcome.cached || agent.valueJson === null) return undefined
  return {
    idempotencyKey: agent.idempotencyKey,
    runId,
    agentId: agent.agentId,
    valueJson: agent.valueJson,
    recordedAt: agent.endedAt ?? event.at
  }
}

/** Applies one event to the current row of its agent (if it names one). */
export const foldEvent = (runId: string, agent: AgentRow | undefined, event: LedgerEvent): Folded => {
  const next =
    agent === undefined ? undefined : isKnownAgentEvent(event) ? stepAgent(agent, event) : annotate(agent, event)
  const agentId = stringField(event, "agentId") ?? null
  return {
    agent: next,
    transition: { runId, agentId, at: event.at, tag: event._tag, note: noteOf(event), data: dataOf(event) },
    success: successOf(runId, event, next),
    run: runUpdateOf(runId, event)
  }
}
