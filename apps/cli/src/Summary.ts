/**
 * The end-of-run summary: a table of agents with outcome, duration, attempts, cost and merge
 * result fitted to the terminal's width (details wrap, or move under the table when it is narrow),
 * then what to copy — kept branches and workspaces, the command that takes the merged work (for a
 * resumed run also when it merged nothing new: its branch holds the work of the runs it resumes),
 * where the logs are — each in full on its own line.
 *
 * @since 0.1.0
 */
import type * as Outcome from "@corral/core/Outcome"
import * as BoxTable from "./BoxTable.ts"
import * as OutcomeText from "./OutcomeText.ts"
import { count } from "./Plural.ts"
import { stopText } from "./ProgressView.ts"
import type { AgentResult, MergeConflict, Report } from "./RunPlan.ts"
import * as TerminalText from "./TerminalText.ts"

const duration = (outcome: Outcome.Outcome): string =>
  outcome.startedAt === null ? "-" : OutcomeText.seconds(outcome.endedAt - outcome.startedAt)

const conflictOf = (outcome: Outcome.Outcome): MergeConflict | undefined =>
  outcome._tag === "Failed" && (outcome.error as { _tag?: string } | undefined)?._tag === "MergeConflict"
    ? (outcome.error as MergeConflict)
    : undefined

const mergeOf = (outcome: Outcome.Outcome): string => {
  if (outcome._tag === "Succeeded") return (outcome.value as AgentResult | undefined)?.merge ?? ""
  return conflictOf(outcome) === undefined ? "" : "conflict"
}

/** The narrowest detail column worth having; below it, details go under the table. */
const minDetailWidth = 20

/** Long agent ids wrap inside their column down to this width. */
const minAgentWidth = 12

/**
 * The exit code of a finished run: 0 when every agent succeeded (and merged), 1 otherwise.
 *
 * @since 0.1.0
 * @category summary
 */
export const exitCode = (report: Report): 0 | 1 => (report.result.allSucceeded ? 0 : 1)

const tableOf = (report: Report, options: { readonly color: boolean; readonly columns: number }) => {
  const outcomes = report.result.outcomes
  const withCost = outcomes.some((outcome) => outcome.usage.costUsd > 0)
  const head = ["agent", "outcome", "time", "tries", ...(withCost ? ["cost"] : []), "merge"]
  const rows = outcomes.map((outcome) => [
    outcome.agentId,
    OutcomeText.word(OutcomeText.tagOf(outcome)),
    duration(outcome),
    String(outcome.attempts),
    ...(withCost ? [outcome.usage.costUsd > 0 ? `$${outcome.usage.costUsd.toFixed(3)}` : ""] : []),
    mergeOf(outcome)
  ])
  const details = outcomes.map((outcome) => OutcomeText.detail(outcome))
  const widths = head.map(
    (title, i) => Math.max(TerminalText.width(title), ...rows.map((row) => TerminalText.width(row[i]!))) + 2
  )
  const anyDetail = details.some((detail) => detail.length > 0)
  const others = widths.slice(1).reduce((sum, w) => sum + w, 0)
  const borders = head.length + 1
  const agentFor = (room: number) => Math.max(minAgentWidth, Math.min(widths[0]!, room))
  const inlineAgent = agentFor(options.columns - others - borders - 1 - minDetailWidth)
  const detailWidth = options.columns - others - borders - 1 - inlineAgent
  const inline = anyDetail && detailWidth >= minDetailWidth
  widths[0] = inline ? inlineAgent : agentFor(options.columns - others - borders)
  const cellWidths = inline ? [...widths, detailWidth] : widths
  const table = BoxTable.render({
    head: inline ? [...head, "detail"] : head,
    rows: rows.map((row, i) =>
      (inline ? [...row, details[i]!] : row).map((cell, column) => TerminalText.wrapHard(cell, cellWidths[column]! - 2))
    ),
    widths: cellWidths,
    color: options.color
  })
  const below = inline
    ? []
    : outcomes.flatMap((outcome, i) => (details[i]!.length > 0 ? [`${outcome.agentId}: ${details[i]}`] : []))
  return [table, ...below]
}

/**
 * Renders the summary as text for a terminal `columns` wide (default 80).
 *
 * @since 0.1.0
 * @category summary
 */
export const render = (
  report: Report,
  options: { readonly color: boolean; readonly columns?: number | undefined }
): string => {
  const columns = options.columns !== undefined && options.columns > 0 ? options.columns : 80
  const lines = [...tableOf(report, { color: options.color, columns }), ""]
  const say = (text: string) => lines.push(TerminalText.wrap(text, columns))
  const copy = (text: string) => lines.push(`  ${text}`)
  const { result } = report
  const counts = Object.entries(result.counts).map(([tag, n]) => `${n} ${OutcomeText.word(tag)}`)
  say(`run ${report.runId}: ${counts.join(", ")} in ${OutcomeText.seconds(result.wallMs)}`)
  if (result.stopped !== undefined) say(`stopped: ${stopText(result.stopped)}`)
  if (result.usage.costUsd > 0) say(`cost: $${result.usage.costUsd.toFixed(3)}`)
  for (const outcome of result.outcomes) {
    const conflict = conflictOf(outcome)
    if (conflict === undefined) continue
    say(`${conflict.agentId} conflicts in ${conflict.paths.join(", ")}; its branch is kept:`)
    copy(conflict.branch)
  }
  for (const kept of report.keptWorkspaces) {
    say(`kept the workspace of ${kept.agentId} (${kept.reasons.join("; ")}):`)
    copy(kept.dir)
  }
  if (report.integrationBranch !== undefined) {
    const head = report.integrationHead?.slice(0, 10)
    if (report.integrationHead !== report.integrationBase) {
      const merged = result.outcomes.filter((outcome) => mergeOf(outcome) === "merged").length
      say(`merged work of ${count(merged, "agent")} (${head}); take it with:`)
      copy(`git merge ${report.integrationBranch}`)
    } else if (report.integrationFrom !== undefined) {
      say(
        `no new work merged; the work of the runs this one resumes is on its integration branch (${head}); take it with:`
      )
      copy(`git merge ${report.integrationBranch}`)
    }
  }
  say("logs:")
  copy(report.logDir)
  return lines.join("\n")
}
