import type { AgentRecord, RunRecord, Span } from "@corral/platform-node/RunRecord"
import { agentExtent, escapeHtml, formatMs, niceStep, outcomeClass, outcomeOf, runEnd, spanMs } from "./reportFormat.ts"

interface Scale {
  readonly start: number
  readonly total: number
}

interface Extent {
  readonly start: number
  readonly end: number
}

const pct = (value: number): string => `${Math.min(100, Math.max(0, value)).toFixed(3)}%`

const scaleOf = (run: RunRecord): Scale => ({ start: run.startedAt, total: Math.max(1, runEnd(run) - run.startedAt) })

const clampExtent = (extent: Extent, scale: Scale): Extent => {
  const end = scale.start + scale.total
  const start = Math.min(end, Math.max(scale.start, extent.start))
  return { start, end: Math.min(end, Math.max(start, extent.end)) }
}

const within = (extent: Extent, at: number): string =>
  pct(extent.end === extent.start ? 100 : ((at - extent.start) / (extent.end - extent.start)) * 100)

const segment = (span: Span, extent: Extent): string => {
  const left = Math.max(span.start, extent.start)
  const right = Math.min(span.end, extent.end)
  const width = extent.end === extent.start ? 0 : ((right - left) / (extent.end - extent.start)) * 100
  const tip = `${span.kind} ${formatMs(spanMs(span))}${span.note ? ` · ${span.note}` : ""}`
  return `<div class="seg seg-${span.kind}" style="left:${within(extent, left)};width:${pct(width)}" title="${escapeHtml(tip)}"></div>`
}

const failureMarker = (failure: AgentRecord["failures"][number], extent: Extent, scale: Scale): string => {
  const tip = `attempt ${failure.attempt} failed at +${formatMs(failure.at - scale.start)}: ${failure.message}`
  return `<div class="fail" style="left:${within(extent, Math.min(extent.end, Math.max(extent.start, failure.at)))}" title="${escapeHtml(tip)}"></div>`
}

const barTitle = (agent: AgentRecord, extent: Extent, scale: Scale): string =>
  `${agent.agentId}: ${outcomeOf(agent)} · +${formatMs(extent.start - scale.start)} → +${formatMs(extent.end - scale.start)}`

const bar = (agent: AgentRecord, scale: Scale, critical: boolean): string => {
  const extent = clampExtent(agentExtent(agent, scale.start), scale)
  const left = ((extent.start - scale.start) / scale.total) * 100
  const width = ((extent.end - extent.start) / scale.total) * 100
  const classes = ["bar", outcomeClass(outcomeOf(agent)), ...(critical ? ["critical"] : [])].join(" ")
  const inner = [
    ...agent.spans.filter((s) => s.end > extent.start && s.start < extent.end).map((s) => segment(s, extent)),
    `<div class="cap"></div>`,
    ...agent.failures.map((f) => failureMarker(f, extent, scale))
  ].join("")
  return `<div class="${classes}" data-agent="${escapeHtml(agent.agentId)}" style="left:${pct(left)};width:${pct(width)}" title="${escapeHtml(barTitle(agent, extent, scale))}">${inner}</div>`
}

const row = (agent: AgentRecord, scale: Scale, critical: boolean): string => {
  const id = escapeHtml(agent.agentId)
  const outcome = outcomeOf(agent)
  const attempts = agent.attempts > 1 ? ` <span class="muted">×${agent.attempts}</span>` : ""
  return [
    `<div class="row${critical ? " critical" : ""}">`,
    `<div class="label" title="${id}">${critical ? `<span class="cp-mark">◆</span>` : ""}${id}</div>`,
    `<div class="track">${bar(agent, scale, critical)}</div>`,
    `<div class="end"><span class="badge ${outcomeClass(outcome)}">${escapeHtml(outcome)}</span>${attempts}</div>`,
    `</div>`
  ].join("")
}

const axis = (scale: Scale, step: number): string => {
  const ticks: Array<string> = []
  for (let t = 0; t <= scale.total; t += step) {
    ticks.push(`<span class="tick" style="left:${pct((t / scale.total) * 100)}">${t === 0 ? "0" : formatMs(t)}</span>`)
  }
  return `<div class="row axis-row"><div class="label muted">since start</div><div class="axis">${ticks.join("")}</div><div class="end"></div></div>`
}

export const byStart = (run: RunRecord): ReadonlyArray<AgentRecord> =>
  run.agents
    .map((agent, index) => ({ agent, index, start: agentExtent(agent, run.startedAt).start }))
    .sort((a, b) => a.start - b.start || a.index - b.index)
    .map(({ agent }) => agent)

export const timeline = (run: RunRecord): string => {
  const scale = scaleOf(run)
  const step = niceStep(scale.total, 10)
  const critical = new Set(run.criticalPath)
  const rows = byStart(run).map((agent) => row(agent, scale, critical.has(agent.agentId)))
  return `<section class="timeline" style="--tick:${pct((step / scale.total) * 100)}">${axis(scale, step)}${rows.join("")}</section>`
}
