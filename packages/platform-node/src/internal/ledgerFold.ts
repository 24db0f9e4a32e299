import * as CorralEvent from "@corral/core/CorralEvent"
import type * as Outcome from "@corral/core/Outcome"
import type { LedgerEvent } from "../RunLedger.ts"
import type * as RunRecord from "../RunRecord.ts"
import {
  type AgentRow,
  encodeValue,
  field,
  type MutableAgentRow,
  type RunUpdate,
  type SuccessRow,
  type TransitionRow
} from "./ledgerModel.ts"

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
): MutableAgentRow => ({
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

const finish = (agent: MutableAgentRow, outcome: Outcome.Outcome, at: number): void => {
  agent.state = "done"
  agent.outcome = outcome._tag === "Succeeded" && outcome.cached ? "Cached" : outcome._tag
  agent.detail = outcomeDetail(outcome)
  agent.attempts = outcome.attempts
  agent.queuedAt ??= outcome.queuedAt
  agent.startedAt = outcome.startedAt ?? agent.startedAt
  agent.endedAt = outcome.endedAt ?? at
  agent.costUsd = outcome.usage.costUsd
  agent.tokens = outcome.usage.inputTokens + outcome.usage.outputTokens
  agent.valueJson = outcome._tag === "Succeeded" ? encodeValue(outcome.value) : null
}

const stepAgent = (agent: MutableAgentRow, event: AgentEvent): void => {
  switch (event._tag) {
    case "Queued":
      agent.state = "queued"
      agent.queuedAt = event.at
      return
    case "WaitingForClaims":
    case "WaitingForRateLimit":
    case "ClaimsAcquired":
      agent.state = "waiting"
      return
    case "Started":
      agent.state = "running"
      agent.startedAt = event.at
      agent.attempts = Math.max(1, agent.attempts)
      return
    case "Retrying":
      agent.state = "running"
      agent.attempts = event.attempt
      return
    case "Finished":
      finish(agent, event.outcome, event.at)
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

const annotate = (agent: MutableAgentRow, event: LedgerEvent): void => {
  const merge = mergeTags[event._tag]
  agent.branch = stringField(event, "branch") ?? agent.branch
  agent.logPath = stringField(event, "logPath") ?? agent.logPath
  if (merge !== undefined) agent.merge = merge
}

const runStatusOf = (event: Extract<Known, { _tag: "RunFinished" }>): RunRecord.RunStatus => {
  if (event.stopped?._tag === "Stopped") return "interrupted"
  if (event.stopped !== undefined) return "failed"
  return event.progress.succeeded === event.progress.total ? "succeeded" : "failed"
}

/** The run's final status and end, when the event is `RunFinished`. */
export const runUpdateOf = (runId: string, event: LedgerEvent): RunUpdate | undefined =>
  event._tag === "RunFinished"
    ? { runId, status: runStatusOf(event as Extract<Known, { _tag: "RunFinished" }>), endedAt: event.at }
    : undefined

/** The success row a `Finished` event records for an agent with an idempotency key (after `stepRow`). */
export const successOf = (runId: string, event: LedgerEvent, agent: AgentRow): SuccessRow | undefined => {
  if (event._tag !== "Finished" || agent.idempotencyKey === null) return undefined
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

/** Applies one event to a row of its agent, in place. */
export const stepRow = (agent: MutableAgentRow, event: LedgerEvent): void => {
  if (isKnownAgentEvent(event)) stepAgent(agent, event)
  else annotate(agent, event)
}

/** The transition row of one event. */
export const transitionOf = (runId: string, event: LedgerEvent): TransitionRow => ({
  runId,
  agentId: stringField(event, "agentId") ?? null,
  at: event.at,
  tag: event._tag,
  note: noteOf(event),
  data: dataOf(event)
})
