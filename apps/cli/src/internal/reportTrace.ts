import type { AgentRecord, RunRecord, Span } from "@corral/platform-node/RunRecord"
import type { TraceEvent, TraceFile } from "../Report.ts"
import { agentExtent, outcomeOf, runEnd } from "./reportFormat.ts"
import { byStart } from "./reportTimeline.ts"

interface Thread {
  readonly pid: number
  readonly tid: number
  readonly t0: number
}

const micros = (thread: Thread, at: number): number => Math.max(0, Math.round((at - thread.t0) * 1000))

const metadata = (thread: Thread, agent: AgentRecord, index: number): ReadonlyArray<TraceEvent> => [
  { ph: "M", name: "thread_name", pid: thread.pid, tid: thread.tid, args: { name: agent.agentId } },
  { ph: "M", name: "thread_sort_index", pid: thread.pid, tid: thread.tid, args: { sort_index: index } }
]

const complete = (
  thread: Thread,
  range: { readonly start: number; readonly end: number },
  fields: { readonly name: string; readonly cat: string; readonly args: Record<string, unknown> }
): TraceEvent => {
  const ts = micros(thread, range.start)
  return { ph: "X", ...fields, pid: thread.pid, tid: thread.tid, ts, dur: Math.max(0, micros(thread, range.end) - ts) }
}

const agentEvent = (thread: Thread, agent: AgentRecord, critical: boolean): TraceEvent =>
  complete(thread, agentExtent(agent, thread.t0), {
    name: agent.agentId,
    cat: critical ? "agent,critical-path" : "agent",
    args: {
      outcome: outcomeOf(agent),
      attempts: agent.attempts,
      costUsd: agent.costUsd,
      tokens: agent.tokens,
      merge: agent.merge,
      detail: agent.detail,
      dependsOn: agent.dependsOn,
      criticalPath: critical
    }
  })

const spanEvent = (thread: Thread, agent: AgentRecord, span: Span): TraceEvent =>
  complete(thread, span, {
    name: span.kind,
    cat: span.kind,
    args: { agent: agent.agentId, outcome: outcomeOf(agent), ...(span.note === undefined ? {} : { note: span.note }) }
  })

const failureEvent = (thread: Thread, agent: AgentRecord, failure: AgentRecord["failures"][number]): TraceEvent => ({
  ph: "i",
  s: "t",
  name: `attempt ${failure.attempt} failed`,
  cat: "failure",
  pid: thread.pid,
  tid: thread.tid,
  ts: micros(thread, failure.at),
  args: { agent: agent.agentId, attempt: failure.attempt, message: failure.message }
})

const agentEvents = (run: RunRecord, agent: AgentRecord, index: number): ReadonlyArray<TraceEvent> => {
  const thread = { pid: run.pid, tid: index + 1, t0: run.startedAt }
  return [
    ...metadata(thread, agent, index),
    agentEvent(thread, agent, run.criticalPath.includes(agent.agentId)),
    ...agent.spans.map((span) => spanEvent(thread, agent, span)),
    ...agent.failures.map((failure) => failureEvent(thread, agent, failure))
  ]
}

export const traceOf = (run: RunRecord): TraceFile => ({
  traceEvents: [
    { ph: "M", name: "process_name", pid: run.pid, tid: 0, args: { name: `corral run ${run.runId}` } },
    ...byStart(run).flatMap((agent, index) => agentEvents(run, agent, index))
  ],
  displayTimeUnit: "ms",
  otherData: {
    runId: run.runId,
    planFile: run.planFile,
    planHash: run.planHash,
    status: run.status,
    hostname: run.hostname,
    startedAt: new Date(run.startedAt).toISOString(),
    wallMs: runEnd(run) - run.startedAt,
    wallMsIs: run.status === "crashed" ? "at least" : run.endedAt === null ? "so far" : "exact",
    criticalPath: run.criticalPath.join(" → ")
  }
})
