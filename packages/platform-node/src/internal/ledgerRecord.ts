import type * as RunRecord from "../RunRecord.ts"
import { type AgentRow, decodeValue, type RunRow, type TransitionRow } from "./ledgerModel.ts"

type Span = RunRecord.Span
type Failure = RunRecord.AgentRecord["failures"][number]

const failedOutcomes = new Set(["Failed", "TimedOut", "ClaimTimedOut"])
const endsWaiting = new Set(["ClaimsAcquired", "Started", "Finished", "WaitingForClaims", "WaitingForRateLimit"])
const endsRunning = new Set(["Retrying", "Finished"])

const dataField = (row: TransitionRow, field: string): unknown => {
  if (row.data === null) return undefined
  try {
    return (JSON.parse(row.data) as Record<string, unknown>)[field]
  } catch {
    return undefined
  }
}

const nextAt = (rows: ReadonlyArray<TransitionRow>, from: number, tags: ReadonlySet<string>, horizon: number) => {
  for (let i = from + 1; i < rows.length; i++) if (tags.has(rows[i]!.tag)) return rows[i]!.at
  return horizon
}

const span = (kind: RunRecord.SpanKind, start: number, end: number, note?: string | null): Span =>
  note === undefined || note === null ? { kind, start, end } : { kind, start, end, note }

const activitySpans = (rows: ReadonlyArray<TransitionRow>, horizon: number): Array<Span> => {
  const spans: Array<Span> = []
  let attempt = 1
  rows.forEach((row, i) => {
    if (row.tag === "WaitingForClaims")
      spans.push(span("waiting-claims", row.at, nextAt(rows, i, endsWaiting, horizon), row.note))
    if (row.tag === "WaitingForRateLimit") {
      const ms = dataField(row, "ms")
      const end = nextAt(rows, i, endsWaiting, typeof ms === "number" ? Math.min(horizon, row.at + ms) : horizon)
      spans.push(span("waiting-rate-limit", row.at, end, row.note))
    }
    if (row.tag === "Retrying") attempt = Number(dataField(row, "attempt") ?? attempt + 1)
    if (row.tag === "Started" || row.tag === "Retrying") {
      spans.push(span("running", row.at, nextAt(rows, i, endsRunning, horizon), `attempt ${attempt}`))
    }
  })
  return spans
}

const queueSpans = (agent: AgentRow, rows: ReadonlyArray<TransitionRow>, depsDone: number | null, horizon: number) => {
  if (agent.queuedAt === null) return []
  const firstActivity = rows.find((row) => endsWaiting.has(row.tag))?.at ?? horizon
  const ready = depsDone === null ? (JSON.parse(agent.dependsOn).length > 0 ? firstActivity : agent.queuedAt) : depsDone
  const spans: Array<Span> = []
  if (ready > agent.queuedAt) spans.push(span("waiting-deps", agent.queuedAt, Math.min(ready, firstActivity)))
  const queuedFrom = Math.max(agent.queuedAt, Math.min(ready, firstActivity))
  if (firstActivity > queuedFrom) spans.push(span("queued", queuedFrom, firstActivity))
  return spans
}

const failuresOf = (agent: AgentRow, rows: ReadonlyArray<TransitionRow>): Array<Failure> => {
  const failures: Array<Failure> = rows
    .filter((row) => row.tag === "Retrying")
    .map((row) => {
      const attempt = Number(dataField(row, "attempt") ?? 2)
      const message = dataField(row, "message")
      return { at: row.at, attempt: attempt - 1, message: typeof message === "string" ? message : "attempt failed" }
    })
  if (agent.outcome !== null && failedOutcomes.has(agent.outcome)) {
    failures.push({ at: agent.endedAt ?? 0, attempt: agent.attempts, message: agent.detail })
  }
  return failures
}

const workspacesOf = (rows: ReadonlyArray<TransitionRow>): Array<{ readonly attempt: number; readonly dir: string }> =>
  rows.flatMap((row) => {
    if (row.tag !== "AttemptWorkspace") return []
    const attempt = dataField(row, "attempt")
    const dir = dataField(row, "dir")
    return typeof attempt === "number" && typeof dir === "string" ? [{ attempt, dir }] : []
  })

const workspacesField = (workspaces: RunRecord.AgentRecord["workspaces"]) =>
  workspaces === undefined || workspaces.length === 0 ? {} : { workspaces }

const depsDoneAt = (agent: AgentRow, byId: ReadonlyMap<string, AgentRow>): number | null => {
  const deps = JSON.parse(agent.dependsOn) as Array<string>
  let latest: number | null = null
  for (const dep of deps) {
    const endedAt = byId.get(dep)?.endedAt ?? null
    if (endedAt === null) return null
    latest = Math.max(latest ?? endedAt, endedAt)
  }
  return latest
}

const agentRecord = (
  row: AgentRow,
  rows: ReadonlyArray<TransitionRow>,
  byId: ReadonlyMap<string, AgentRow>,
  horizon: number
): RunRecord.AgentRecord => {
  const end = row.endedAt ?? horizon
  const agent = { ...row, queuedAt: row.queuedAt ?? rows.find((t) => t.tag === "Queued")?.at ?? null }
  const spans = [...queueSpans(agent, rows, depsDoneAt(agent, byId), end), ...activitySpans(rows, end)]
  return {
    agentId: agent.agentId,
    dependsOn: JSON.parse(agent.dependsOn) as Array<string>,
    outcome: agent.outcome,
    state: agent.state,
    detail: agent.detail,
    attempts: agent.attempts,
    queuedAt: agent.queuedAt,
    startedAt: agent.startedAt,
    endedAt: agent.endedAt,
    costUsd: agent.costUsd,
    tokens: agent.tokens,
    idempotencyKey: agent.idempotencyKey,
    branch: agent.branch,
    merge: agent.merge,
    logPath: agent.logPath,
    value: agent.valueJson === null ? undefined : decodeValue(agent.valueJson),
    failures: failuresOf(agent, rows),
    ...workspacesField(workspacesOf(rows)),
    spans: spans.sort((a, b) => a.start - b.start)
  }
}

/** The agents named as holders in an agent's claim waits (`src/a.ts (write, held by b)`). */
const claimHolders = (agent: RunRecord.AgentRecord): Array<string> =>
  agent.spans.flatMap((span) =>
    span.kind === "waiting-claims" && span.note !== undefined
      ? [...span.note.matchAll(/held by ([^)]+)\)/g)].flatMap((match) => match[1]!.split(", "))
      : []
  )

/**
 * The run's critical path from its actual waits: it ends with the agent that finished last and goes
 * back, agent by agent, to the one whose end let it start — the latest-ending of its dependencies
 * and of the holders of the claims it waited for. Agents that started as soon as they were queued
 * begin the path.
 */
export const criticalPath = (agents: ReadonlyArray<RunRecord.AgentRecord>): Array<string> => {
  const byId = new Map(agents.map((agent) => [agent.agentId, agent]))
  const started = agents.filter((agent) => agent.startedAt !== null && agent.endedAt !== null)
  let current = started.reduce<RunRecord.AgentRecord | undefined>(
    (last, agent) => (last === undefined || agent.endedAt! > last.endedAt! ? agent : last),
    undefined
  )
  const path: Array<string> = []
  const seen = new Set<string>()
  while (current !== undefined && !seen.has(current.agentId)) {
    seen.add(current.agentId)
    path.push(current.agentId)
    const startedAt = current.startedAt!
    let next: RunRecord.AgentRecord | undefined
    for (const id of new Set([...current.dependsOn, ...claimHolders(current)])) {
      const candidate = byId.get(id)
      if (candidate?.endedAt === null || candidate?.endedAt === undefined || candidate.startedAt === null) continue
      if (candidate.endedAt > startedAt) continue
      if (next === undefined || candidate.endedAt > next.endedAt!) next = candidate
    }
    current = next
  }
  return path.reverse()
}

const horizonOf = (run: RunRow, transitions: ReadonlyArray<TransitionRow>): number =>
  run.endedAt ?? transitions.reduce((latest, row) => Math.max(latest, row.at), Math.max(run.heartbeatAt, run.startedAt))

const stopReasonOf = (transitions: ReadonlyArray<TransitionRow>): string | undefined => {
  const stopping = transitions.find((row) => row.tag === "Stopping" && row.agentId === null)
  if (stopping === undefined) return undefined
  const reason = dataField(stopping, "reason") as { _tag?: string; reason?: unknown; agentId?: unknown } | undefined
  if (typeof reason?.reason === "string") return reason.reason
  if (reason?._tag === "AgentFailed" && typeof reason.agentId === "string")
    return `${reason.agentId} failed (fail-fast)`
  return stopping.note ?? undefined
}

/** The last `RunnersStillRunning` of the run: `running` (agent and runner), or only `agents` as recorded before. */
const leftRunningOf = (transitions: ReadonlyArray<TransitionRow>): RunRecord.RunRecord["leftRunning"] => {
  const row = transitions.findLast((row) => row.tag === "RunnersStillRunning" && row.agentId === null)
  if (row === undefined) return undefined
  const running = dataField(row, "running")
  if (Array.isArray(running)) {
    return running.flatMap((entry: { agent?: unknown; runner?: unknown }) =>
      typeof entry?.agent === "string"
        ? [{ agentId: entry.agent, runner: typeof entry.runner === "string" ? entry.runner : undefined }]
        : []
    )
  }
  const agents = dataField(row, "agents")
  return Array.isArray(agents)
    ? agents.filter((id): id is string => typeof id === "string").map((agentId) => ({ agentId, runner: undefined }))
    : undefined
}

/** Derives the read model from the stored rows of one run. */
export const buildRunRecord = (
  run: RunRow,
  agents: ReadonlyArray<AgentRow>,
  transitions: ReadonlyArray<TransitionRow>
): RunRecord.RunRecord => {
  const byId = new Map(agents.map((agent) => [agent.agentId, agent]))
  const perAgent = new Map<string, Array<TransitionRow>>()
  for (const row of transitions) {
    if (row.agentId === null) continue
    const list = perAgent.get(row.agentId)
    if (list === undefined) perAgent.set(row.agentId, [row])
    else list.push(row)
  }
  const horizon = horizonOf(run, transitions)
  const records = [...agents]
    .sort((a, b) => a.position - b.position)
    .map((agent) => agentRecord(agent, perAgent.get(agent.agentId) ?? [], byId, horizon))
  return {
    runId: run.runId,
    planFile: run.planFile,
    planHash: run.planHash,
    status: run.status,
    pid: run.pid,
    hostname: run.hostname,
    startedAt: run.startedAt,
    endedAt: run.endedAt,
    criticalPath: criticalPath(records),
    agents: records,
    stopReason: stopReasonOf(transitions),
    leftRunning: leftRunningOf(transitions)
  }
}
