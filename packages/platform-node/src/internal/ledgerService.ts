import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as SqlError from "effect/sql/SqlError"
import type { CachedSuccess, LedgerEvent, RunStart, RunSummary, Service } from "../RunLedger.ts"
import type * as RunRecord from "../RunRecord.ts"
import { ledgerError, RunLedgerError } from "./ledgerError.ts"
import { foldEvent, newAgentRow } from "./ledgerFold.ts"
import {
  type AgentRow,
  agentKey,
  type Batch,
  decodeValue,
  encodeValue,
  field,
  mergeRunUpdate,
  type RunRow
} from "./ledgerModel.ts"
import { buildRunRecord } from "./ledgerRecord.ts"
import type { WriteStats } from "./ledgerSql.ts"
import type { LedgerStore, RunSummaryRow } from "./ledgerStore.ts"
import { makeWriter, type WriterOptions } from "./ledgerWriter.ts"

const key = (row: AgentRow): string => agentKey(row.runId, row.agentId)

/** An agent's current row, and its key in a batch (built once per agent, not once per event). */
interface Slot {
  row: AgentRow
  readonly key: string
}

type Agents = Map<string, Slot>

const slot = (row: AgentRow): Slot => ({ row, key: key(row) })

const slotsOf = (rows: ReadonlyArray<AgentRow>): Agents => new Map(rows.map((row) => [row.agentId, slot(row)]))

const unfinished: ReadonlySet<RunRecord.RunStatus> = new Set(["running", "crashed", "interrupted"])

const toSummary = ({ optionsJson, ...row }: RunSummaryRow): RunSummary => ({
  ...row,
  options: JSON.parse(optionsJson) as unknown
})

const runRow = (start: RunStart): RunRow => ({
  runId: start.runId,
  planFile: start.planFile,
  planHash: start.planHash,
  optionsJson: JSON.stringify(start.options ?? null),
  status: "running",
  pid: start.pid,
  hostname: start.hostname,
  startedAt: start.startedAt,
  endedAt: null,
  heartbeatAt: start.startedAt
})

const putAgent = (batch: Batch, row: AgentRow): void => {
  batch.agents.set(key(row), row)
}

const crashedBatch = (run: RunRow, agents: ReadonlyArray<AgentRow>, batch: Batch): void => {
  const at = run.heartbeatAt
  mergeRunUpdate(batch, { runId: run.runId, status: "crashed", endedAt: at })
  for (const agent of agents) {
    if (agent.state === "done") continue
    const endedAt = Math.max(at, agent.startedAt ?? 0, agent.queuedAt ?? 0)
    putAgent(batch, { ...agent, state: "done", outcome: "Interrupted", detail: "crashed", endedAt })
    batch.transitions.push({
      runId: run.runId,
      agentId: agent.agentId,
      at: endedAt,
      tag: "Crashed",
      note: null,
      data: null
    })
  }
}

/** The ledger over a store: events fold into agent rows in memory and reach the store in batches. */
export const makeLedger = (
  store: LedgerStore,
  options: WriterOptions & { readonly commitEachFinished: boolean },
  stats: WriteStats
): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function* () {
    const writer = yield* makeWriter(store, options)
    const runs = new Map<string, Agents>()
    const fail = (operation: string) => (effect: Effect.Effect<any, SqlError.SqlError>) =>
      Effect.mapError(effect, ledgerError(operation))
    const flush = fail("flush")(writer.flush)
    const read = <A>(operation: string, effect: Effect.Effect<A, SqlError.SqlError>) =>
      fail(operation)(Effect.andThen(writer.flush, effect)) as Effect.Effect<A, RunLedgerError>

    const agentsOf = (runId: string): Effect.Effect<Agents, RunLedgerError> => {
      const cached = runs.get(runId)
      if (cached !== undefined) return Effect.succeed(cached)
      return Effect.gen(function* () {
        const run = yield* read("record", store.run(runId))
        if (run === undefined) {
          return yield* new RunLedgerError({ operation: "record", message: `no run ${runId} was started` })
        }
        const rows = yield* read("record", store.agents(runId))
        const agents = runs.get(runId) ?? slotsOf(rows)
        runs.set(runId, agents)
        return agents
      })
    }

    const startRun = (start: RunStart) =>
      Effect.gen(function* () {
        if (runs.has(start.runId) || (yield* read("startRun", store.run(start.runId))) !== undefined) {
          return yield* new RunLedgerError({ operation: "startRun", message: `run ${start.runId} is already recorded` })
        }
        const rows = start.agents.map((a, i) =>
          newAgentRow(start.runId, a.agentId, i, a.dependsOn, a.idempotencyKey ?? null)
        )
        runs.set(start.runId, slotsOf(rows))
        yield* fail("startRun")(
          writer.add((batch) => {
            batch.runs.push(runRow(start))
            for (const row of rows) putAgent(batch, row)
          })
        )
        yield* flush
      })

    const failRecord = fail("record")
    const flushRecord = failRecord(writer.flush)

    /** One event into the agent's row and the pending batch, synchronously; the effect flushes if it must. */
    const recordIn = (agents: Agents, runId: string, event: LedgerEvent): Effect.Effect<void, RunLedgerError> => {
      const agentId = field(event, "agentId")
      let current: Slot | undefined
      if (typeof agentId === "string") {
        current = agents.get(agentId)
        if (current === undefined) agents.set(agentId, (current = slot(newAgentRow(runId, agentId, agents.size))))
      }
      const folded = foldEvent(runId, current?.row, event)
      const batch = writer.pending()
      if (current !== undefined && folded.agent !== undefined) {
        current.row = folded.agent
        if (event._tag !== "Queued" || batch.agents.has(current.key)) batch.agents.set(current.key, folded.agent)
      }
      batch.transitions.push(folded.transition)
      if (folded.success !== undefined) batch.successes.set(folded.success.idempotencyKey, folded.success)
      if (folded.run !== undefined) mergeRunUpdate(batch, folded.run)
      const full = writer.written()
      const commitNow = event._tag === "RunFinished" || (event._tag === "Finished" && options.commitEachFinished)
      if (commitNow) return full === Effect.void ? flushRecord : failRecord(Effect.andThen(full, writer.flush))
      if (event._tag === "Finished") writer.flushSoon()
      return full === Effect.void ? Effect.void : failRecord(full)
    }

    const record = (runId: string, event: LedgerEvent) =>
      Effect.suspend(() => {
        const agents = runs.get(runId)
        return agents === undefined
          ? Effect.flatMap(agentsOf(runId), (loaded) => recordIn(loaded, runId, event))
          : recordIn(agents, runId, event)
      })

    const update = (operation: string, runId: string, fields: Omit<Parameters<typeof mergeRunUpdate>[1], "runId">) =>
      Effect.andThen(
        agentsOf(runId),
        fail(operation)(writer.add((batch) => mergeRunUpdate(batch, { runId, ...fields })))
      )

    const getRun = (runId: string) =>
      Effect.gen(function* () {
        const run = yield* read("getRun", store.run(runId))
        if (run === undefined) return Option.none<RunRecord.RunRecord>()
        const agents = yield* read("getRun", store.agents(runId))
        const transitions = yield* read("getRun", store.transitions(runId))
        return Option.some(buildRunRecord(run, agents, transitions))
      })

    const listRuns = () => Effect.map(read("listRuns", store.runs), (rows) => rows.map(toSummary))

    const latestUnfinished = (planHash: string) =>
      Effect.map(listRuns(), (all) =>
        Option.filter(Option.fromNullishOr(all.find((run) => run.planHash === planHash)), (run) =>
          unfinished.has(run.status)
        )
      )

    const markCrashed = (isAlive: (pid: number, hostname: string, runId: string) => boolean) =>
      Effect.gen(function* () {
        const dead = (yield* read("markCrashed", store.running)).filter(
          (run) => !isAlive(run.pid, run.hostname, run.runId)
        )
        for (const run of dead) {
          const agents = yield* read("markCrashed", store.agents(run.runId))
          yield* fail("markCrashed")(writer.add((batch) => crashedBatch(run, agents, batch)))
          runs.delete(run.runId)
        }
        yield* flush
        return dead.map((run) => run.runId)
      })

    const cachedSuccess = (key: string) =>
      Effect.map(read("cachedSuccess", store.success(key)), (row) =>
        row === undefined
          ? Option.none<CachedSuccess>()
          : Option.some({
              value: decodeValue(row.valueJson),
              runId: row.runId,
              agentId: row.agentId,
              recordedAt: row.recordedAt
            })
      )

    const recordSuccess = (key: string, agentId: string, value: unknown, recordedAt: number) => {
      const valueJson = encodeValue(value)
      if (valueJson === null) return Effect.void
      return fail("record")(
        writer.add((batch) => {
          batch.successes.set(key, { idempotencyKey: key, runId: runOf(agentId, key), agentId, valueJson, recordedAt })
        })
      )
    }

    const runOf = (agentId: string, key: string): string => {
      for (const [runId, agents] of runs) if (agents.get(agentId)?.row.idempotencyKey === key) return runId
      return ""
    }

    return {
      startRun,
      record,
      heartbeat: (runId) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => update("heartbeat", runId, { heartbeatAt: now })),
      finishRun: (runId, status, endedAt) => Effect.andThen(update("finishRun", runId, { status, endedAt }), flush),
      flush,
      listRuns,
      getRun,
      latestUnfinished,
      markCrashed,
      cachedSuccess,
      recordSuccess,
      stats: Effect.sync(() => ({ ...stats }))
    } satisfies Service
  })
