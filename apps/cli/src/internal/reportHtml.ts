import type { AgentRecord, RunRecord } from "@corral/platform-node/RunRecord"
import {
  countByOutcome,
  durationMs,
  escapeHtml,
  formatCost,
  formatMs,
  formatUtc,
  outcomeClass,
  outcomeOf,
  runEnd,
  totalCost,
  waitedMs
} from "./reportFormat.ts"
import { byRunner } from "../RunnerNames.ts"
import { css, spanStyles } from "./reportStyle.ts"
import { byStart, timeline } from "./reportTimeline.ts"

const field = (name: string, value: string): string => `<div><span>${name}</span><span>${value}</span></div>`

const chip = (outcome: string, count: number): string =>
  `<span class="chip"><span class="swatch ${outcomeClass(outcome)}"></span>${count} ${escapeHtml(outcome)}</span>`

const header = (run: RunRecord): string => {
  const wall =
    run.status === "crashed"
      ? `at least ${formatMs(runEnd(run) - run.startedAt)} (crashed; its last sign of life)`
      : formatMs(runEnd(run) - run.startedAt) + (run.endedAt === null ? " (so far)" : "")
  const meta = [
    field("plan", `<span class="mono">${escapeHtml(run.planFile)}</span>`),
    field("status", `<span class="status status-${escapeHtml(run.status)}">${escapeHtml(run.status)}</span>`),
    field("started", formatUtc(run.startedAt)),
    field("wall time", wall),
    field("agents", String(run.agents.length)),
    field("total cost", formatCost(totalCost(run)) || "$0"),
    field("host", `${escapeHtml(run.hostname)} · pid ${run.pid}`),
    ...(run.leftRunning === undefined || run.leftRunning.length === 0
      ? []
      : [
          field(
            "left running",
            escapeHtml(byRunner(run.leftRunning.map(({ agentId, runner }) => ({ agent: agentId, runner }))))
          )
        ])
  ]
  const chips = countByOutcome(run).map(([outcome, n]) => chip(outcome, n))
  return `<header><h1>corral run <span class="mono">${escapeHtml(run.runId)}</span></h1><div class="meta">${meta.join("")}</div><div class="chips">${chips.join("")}</div></header>`
}

const legendItem = (swatch: string, label: string): string =>
  `<span class="item"><span class="${swatch}"></span>${label}</span>`

const legend = (run: RunRecord): string => {
  const spans = spanStyles.map(([kind, label]) => legendItem(`swatch seg-${kind}`, label))
  const path = run.criticalPath.length > 0 ? ` (${run.criticalPath.map(escapeHtml).join(" → ")})` : ""
  return `<div class="legend">${[
    ...spans,
    legendItem("swatch failmark", "failed attempt"),
    legendItem("swatch cp", `critical path${path}`),
    `<span class="item muted">critical path: the chain that decided when the run ended — each agent on it waited for the one before (a dependency, or a claim it held)</span>`,
    `<span class="item muted">bar end = outcome colour; hover a bar for details</span>`
  ].join("")}</div>`
}

const failureList = (agent: AgentRecord): string =>
  agent.failures.length === 0
    ? ""
    : `<ul class="failures">${agent.failures
        .map((f) => `<li>attempt ${f.attempt}: ${escapeHtml(f.message)}</li>`)
        .join("")}</ul>`

const tableRow = (agent: AgentRecord, critical: boolean): string => {
  const outcome = outcomeOf(agent)
  const duration = durationMs(agent)
  const cells = [
    `<td class="mono">${critical ? `<span class="cp-mark">◆</span>` : ""}${escapeHtml(agent.agentId)}</td>`,
    `<td><span class="badge ${outcomeClass(outcome)}">${escapeHtml(outcome)}</span></td>`,
    `<td class="num">${agent.attempts}</td>`,
    `<td class="num">${duration === null ? "–" : formatMs(duration)}</td>`,
    `<td class="num">${formatMs(waitedMs(agent))}</td>`,
    `<td class="num">${formatCost(agent.costUsd)}</td>`,
    `<td>${escapeHtml(agent.merge ?? "")}</td>`,
    `<td class="detail">${escapeHtml(agent.detail)}${failureList(agent)}</td>`
  ]
  return `<tr data-agent="${escapeHtml(agent.agentId)}">${cells.join("")}</tr>`
}

const table = (run: RunRecord): string => {
  const critical = new Set(run.criticalPath)
  const head = ["agent", "outcome", "attempts", "duration", "waited", "cost", "merge", "detail"]
    .map((h) => `<th${["attempts", "duration", "waited", "cost"].includes(h) ? ` class="num"` : ""}>${h}</th>`)
    .join("")
  const rows = byStart(run).map((a) => tableRow(a, critical.has(a.agentId)))
  return `<table class="outcomes"><thead><tr>${head}</tr></thead><tbody>${rows.join("")}</tbody></table>`
}

export const page = (run: RunRecord): string =>
  [
    `<!doctype html>`,
    `<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">`,
    `<title>corral run ${escapeHtml(run.runId)}</title><style>${css()}</style></head><body>`,
    header(run),
    `<h2>Timeline</h2>`,
    legend(run),
    timeline(run),
    `<h2>Outcomes</h2>`,
    table(run),
    `</body></html>`,
    ``
  ].join("\n")
