/**
 * The end-of-run summary: a table of agents with outcome, duration, attempts, cost and merge
 * result, then conflicts, kept workspaces, where the logs are and how to take the work.
 *
 * @since 0.1.0
 */
import type { Outcome } from "@corral/core"
import Table from "cli-table3"
import { detailOf, stopText } from "./ProgressView.ts"
import type { AgentResult, Report } from "./RunPlan.ts"

const duration = (outcome: Outcome.Outcome): string =>
  outcome.startedAt === null ? "-" : `${((outcome.endedAt - outcome.startedAt) / 1000).toFixed(1)}s`

const mergeOf = (outcome: Outcome.Outcome): string => {
  if (outcome._tag === "Succeeded") return (outcome.value as AgentResult | undefined)?.merge ?? ""
  if (outcome._tag === "Failed" && (outcome.error as { _tag?: string } | undefined)?._tag === "MergeConflict")
    return "conflict"
  return ""
}

/**
 * The exit code of a finished run: 0 when every agent succeeded (and merged), 1 otherwise.
 *
 * @since 0.1.0
 * @category summary
 */
export const exitCode = (report: Report): 0 | 1 => (report.result.allSucceeded ? 0 : 1)

/**
 * Renders the summary as text.
 *
 * @since 0.1.0
 * @category summary
 */
export const render = (
  report: Report,
  options: { readonly color: boolean; readonly columns?: number | undefined }
): string => {
  const idWidth = Math.max(7, ...report.result.outcomes.map((o) => o.agentId.length + 2))
  const detailWidth = Math.max(24, Math.min(80, (options.columns ?? 120) - idWidth - 60))
  const table = new Table({
    head: ["agent", "outcome", "time", "tries", "cost", "merge", "detail"],
    style: { head: options.color ? ["cyan"] : [], border: options.color ? ["grey"] : [] },
    wordWrap: true,
    chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" },
    colWidths: [null, null, null, null, null, null, detailWidth] as never
  })
  for (const outcome of report.result.outcomes) {
    table.push([
      outcome.agentId,
      outcome._tag === "Succeeded" && outcome.cached ? "Cached" : outcome._tag,
      duration(outcome),
      String(outcome.attempts),
      outcome.usage.costUsd > 0 ? `$${outcome.usage.costUsd.toFixed(3)}` : "",
      mergeOf(outcome),
      detailOf(outcome).replace(/^[: ]+/, "")
    ])
  }
  const lines = [table.toString(), ""]
  const { result } = report
  const counts = Object.entries(result.counts).map(([tag, n]) => `${n} ${tag.toLowerCase()}`)
  lines.push(`run ${report.runId}: ${counts.join(", ")} in ${(result.wallMs / 1000).toFixed(1)}s`)
  if (result.stopped !== undefined) lines.push(`stopped: ${stopText(result.stopped)}`)
  if (result.usage.costUsd > 0) lines.push(`cost: $${result.usage.costUsd.toFixed(3)}`)
  for (const kept of report.keptWorkspaces) lines.push(`kept workspace ${kept.dir}: ${kept.reasons.join("; ")}`)
  if (report.integrationBranch !== undefined) {
    lines.push(
      `merged work: branch ${report.integrationBranch} (${report.integrationHead?.slice(0, 10)}); take it with: git merge ${report.integrationBranch}`
    )
  }
  lines.push(`logs: ${report.logDir}`)
  return lines.join("\n")
}
