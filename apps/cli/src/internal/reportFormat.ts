import type { AgentRecord, RunRecord, Span, SpanKind } from "@corral/platform-node/RunRecord"

const entities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => entities[c]!)

export const outcomeOf = (agent: AgentRecord): string => agent.outcome ?? "Running"

export const outcomeClass = (outcome: string): string => `outcome-${outcome.replace(/[^A-Za-z0-9-]/g, "")}`

export const formatMs = (ms: number): string => {
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`
  const totalSeconds = Math.round(ms / 1000)
  const hours = Math.floor(totalSeconds / 3600)
  const minutes = Math.floor((totalSeconds % 3600) / 60)
  const seconds = totalSeconds % 60
  if (hours > 0) return `${hours}h${minutes > 0 ? `${String(minutes).padStart(2, "0")}m` : ""}`
  return `${minutes}m${seconds > 0 ? `${String(seconds).padStart(2, "0")}s` : ""}`
}

export const formatUtc = (ms: number): string =>
  new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC")

export const formatCost = (usd: number): string => (usd > 0 ? `$${usd.toFixed(usd < 1 ? 3 : 2)}` : "")

export const isWaiting = (kind: SpanKind): boolean => kind !== "running" && kind !== "merging"

export const spanMs = (span: Span): number => Math.max(0, span.end - span.start)

export const waitedMs = (agent: AgentRecord): number =>
  agent.spans.filter((s) => isWaiting(s.kind)).reduce((sum, s) => sum + spanMs(s), 0)

export const durationMs = (agent: AgentRecord): number | null =>
  agent.startedAt === null || agent.endedAt === null ? null : Math.max(0, agent.endedAt - agent.startedAt)

const agentTimes = (agent: AgentRecord): ReadonlyArray<number> => [
  ...agent.spans.flatMap((s) => [s.start, s.end]),
  ...agent.failures.map((f) => f.at),
  ...[agent.queuedAt, agent.startedAt, agent.endedAt].filter((t): t is number => t !== null)
]

export const runEnd = (run: RunRecord): number =>
  run.endedAt ?? Math.max(run.startedAt, ...run.agents.flatMap((a) => agentTimes(a)))

export const agentExtent = (agent: AgentRecord, runStart: number): { readonly start: number; readonly end: number } => {
  const times = agentTimes(agent)
  if (times.length === 0) return { start: runStart, end: runStart }
  return { start: Math.min(...times), end: Math.max(...times) }
}

export const countByOutcome = (run: RunRecord): ReadonlyArray<readonly [string, number]> => {
  const counts = new Map<string, number>()
  for (const agent of run.agents) counts.set(outcomeOf(agent), (counts.get(outcomeOf(agent)) ?? 0) + 1)
  return [...counts.entries()]
}

export const totalCost = (run: RunRecord): number => run.agents.reduce((sum, a) => sum + a.costUsd, 0)

export const niceStep = (totalMs: number, maxTicks: number): number => {
  const raw = totalMs / maxTicks
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200].map((s) => s * 1000)
  const small = [1, 2, 5, 10, 20, 50, 100, 200, 500]
  return [...small, ...steps].find((s) => s >= raw) ?? Math.ceil(raw / 3_600_000) * 3_600_000
}
