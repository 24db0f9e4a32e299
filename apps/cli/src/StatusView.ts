/**
 * `corral status`: a recorded run agent by agent, live while it runs — waiting (for what: claims
 * and their holders, dependencies, a rate limit), running (elapsed, attempt), done (outcome).
 *
 * @since 0.1.0
 */
import type { AgentRecord, RunRecord } from "@corral/platform-node/RunRecord"
import * as AttemptLogs from "./AttemptLogs.ts"
import * as ReportFormat from "./internal/reportFormat.ts"
import * as OutcomeText from "./OutcomeText.ts"
import * as RunnerNames from "./RunnerNames.ts"
import * as TerminalText from "./TerminalText.ts"

const time = (ms: number) => new Date(ms).toISOString().replace("T", " ").slice(0, 19)

const attemptText = (agent: AgentRecord): string =>
  agent.attempts > 1 ? `, attempt ${agent.attempts}` : agent.attempts === 1 ? ", attempt 1" : ""

/**
 * What one agent is doing, e.g. `running 12.3s, attempt 2` or `waiting for src/a.ts (write, held by b)`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const agentState = (run: RunRecord, agent: AgentRecord, now: number): string => {
  if (agent.outcome !== null) {
    const crashed = agent.outcome === "Interrupted" && agent.detail === "crashed"
    const took =
      agent.startedAt === null || agent.endedAt === null
        ? ""
        : crashed
          ? ` after at least ${OutcomeText.seconds(agent.endedAt - agent.startedAt)}`
          : ` in ${OutcomeText.seconds(agent.endedAt - agent.startedAt)}`
    const detail = agent.detail.length > 0 ? ` — ${agent.detail}` : ""
    return `${OutcomeText.word(agent.outcome)}${took}${attemptText(agent)}${detail}`
  }
  if (run.status !== "running") return `never finished (the run is ${run.status})`
  const last = agent.spans.at(-1)
  if (agent.state === "running" || (agent.state === undefined && last?.kind === "running")) {
    const since = agent.startedAt ?? last?.start ?? now
    return `running ${OutcomeText.seconds(now - since)}${attemptText(agent)}`
  }
  if (agent.state === "waiting" && last?.kind === "waiting-claims") return `waiting for ${last.note ?? "claims"}`
  if (agent.state === "waiting" && last?.kind === "waiting-rate-limit")
    return `waiting for rate limit ${last.note ?? ""}`.trim()
  const unfinished = agent.dependsOn.filter(
    (dep) => run.agents.find((other) => other.agentId === dep)?.outcome === null
  )
  if (unfinished.length > 0) return `waiting for ${unfinished.join(", ")} to finish`
  return agent.state === "queued" ? "queued for a free slot" : "pending"
}

/**
 * Of an agent that ran more than one attempt, each attempt's folder and log, each marked when it is
 * no longer there: `attempt 1: folder …/worktrees/<run>/x, log …/logs/x@attempt-1.log`,
 * `attempt 2: folder …/worktrees/<run>/x-attempt-2 (removed), log …/logs/x.log (none)`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const attemptLines = (agent: AgentRecord, logDir: string | undefined): ReadonlyArray<string> => {
  if (agent.workspaces === undefined || agent.attempts < 2) return []
  return AttemptLogs.ofAgent(logDir ?? "", agent.agentId, agent.attempts, agent.workspaces).map(
    ({ attempt, dir, dirExists, log, logExists }) =>
      `attempt ${attempt}: folder ${dir}${dirExists ? "" : " (removed)"}${logDir === undefined ? "" : `, log ${log}${logExists ? "" : " (none)"}`}`
  )
}

/**
 * The agents a cluster run's coordinator left running when it ended, by runner:
 * `left running when the run ended: s1, s2 on runner 10.0.0.5:4001`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const leftRunningLine = (left: NonNullable<RunRecord["leftRunning"]>): string =>
  `  left running when the run ended: ${RunnerNames.byRunner(left.map(({ agentId, runner }) => ({ agent: agentId, runner })))}`

/**
 * The text `corral status` prints.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (run: RunRecord, now: number, logDir?: string): string => {
  const took =
    run.status === "crashed"
      ? `ran at least ${OutcomeText.seconds(ReportFormat.runEnd(run) - run.startedAt)} (its last sign of life)`
      : OutcomeText.seconds((run.endedAt ?? now) - run.startedAt)
  const stopped = run.stopReason === undefined ? "" : ` (${run.stopReason})`
  const lines = [
    `run ${run.runId}: ${run.status}${stopped}, plan ${run.planFile}, started ${time(run.startedAt)}, ${took}`
  ]
  if (run.leftRunning !== undefined && run.leftRunning.length > 0) lines.push(leftRunningLine(run.leftRunning))
  const idWidth = Math.min(24, Math.max(5, ...run.agents.map((agent) => TerminalText.width(agent.agentId))))
  for (const agent of run.agents) {
    lines.push(`  ${TerminalText.pad(agent.agentId, idWidth)}  ${agentState(run, agent, now)}`)
    const result = (agent.value as { readonly process?: { readonly result?: unknown } } | undefined)?.process?.result
    if (result !== undefined) lines.push(`  ${" ".repeat(idWidth)}  result: ${JSON.stringify(result)}`)
    for (const line of attemptLines(agent, logDir)) lines.push(`  ${" ".repeat(idWidth)}  ${line}`)
  }
  return lines.join("\n")
}
