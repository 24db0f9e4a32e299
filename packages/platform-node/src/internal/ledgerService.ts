import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as SqlError from "effect/sql/SqlError"
import type { CachedSuccess, LedgerEvent, RunStart, RunSummary, Service } from "../RunLedger.ts"
import type * as RunRecord from "../RunRecord.ts"
import { ledgerError, RunLedgerError } from "./ledgerError.ts"
import { newAgentRow, runUpdateOf, stepRow, successOf, transitionOf } from "./ledgerFold.ts"
import {
  type AgentRow,
  agentKey,
  type Batch,
  copyAgentRow,
  decodeValue,
  encodeValue,
  field,
  type MutableAgentRow,
  mergeRunUpdate,
  type RunRow,
  type SuccessRow
} from "./ledgerModel.ts"
import { buildRunRecord } from "./ledgerRecord.ts"
import type { WriteStats } from "./ledgerSql.ts"
import type { LedgerStore, LiveStore, RunSummaryRow } from "./ledgerStore.ts"
import { makeWriter, type WriterOptions } from "./ledgerWriter.ts"

const key = (row: AgentRow): string => agentKey(row.runId, row.agentId)

/**
 * An agent's current row, and its key in a batch (built at most once per agent, when a batch first
 * takes the row; a live store never needs it).
 * Events update `row` in place while no committed batch or store has seen it: `owner` is
 * `"private"` when nothing else holds the row, the pending batch it was put in, or `"live"` when a
 * live store holds it (that store takes changes in place). A row in a batch that was taken for a
 * commit, or one read from a store (`undefined`), is copied before the next change, so rows a
 * batched store has seen never change. A store sees an agent's first events if they are `Queued`
 * only with the agent's next event (every agent is queued at the start; its next event follows
 * soon): a live store takes the rows of `startRun` as they are (`"planned"`), and such a row keeps
 * its `Queued` in `queued` until then.
 */
interface Slot {
  row: AgentRow
  key: string | undefined
  owner: Batch | "private" | "planned" | "live" | undefined
  queued: LedgerEvent | undefined
}

type Agents = Map<string, Slot>

const slot = (row: AgentRow, owner: Slot["owner"]): Slot => ({ row, key: undefined, owner, queued: undefined })

const keyOf = (slot: Slot): string => (slot.key ??= key(slot.row))

const slotsOf = (rows: ReadonlyArray<AgentRow>, owner: Slot["owner"]): Agents => {
  const agents: Agents = new Map()
  for (const row of rows) agents.set(row.agentId, slot(row, owner))
  return agents
}

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

/** A crashed run's last sign of life: its last heartbeat or the latest time an agent row records. */
const lastSignOfLife = (run: RunRow, agents: ReadonlyArray<AgentRow>): number =>
  agents.reduce(
    (latest, agent) => Math.max(latest, agent.queuedAt ?? 0, agent.startedAt ?? 0, agent.endedAt ?? 0),
    run.heartbeatAt
  )

const crashedBatch = (run: RunRow, agents: ReadonlyArray<AgentRow>, batch: Batch): void => {
  const at = lastSignOfLife(run, agents)
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

/** The detail of an agent a closing ledger ended (`Interrupted` or `Cancelled`): its run's end never reached the ledger. */
export const unrecordedEnd = "the run was interrupted before its end was recorded"

/**
 * A run this ledger started whose end never reached it by the time the ledger closes (its subscriber
 * was interrupted before `RunFinished`): the run `interrupted` at `at`, its agents that had started
 * `Interrupted` and the others `Cancelled`, as the run's own events would have said.
 */
const unrecordedEndBatch = (runId: string, agents: ReadonlyArray<AgentRow>, at: number, batch: Batch): void => {
  mergeRunUpdate(batch, { runId, status: "interrupted", endedAt: at })
  for (const agent of agents) {
    if (agent.state === "done") continue
    const outcome = agent.startedAt === null ? "Cancelled" : "Interrupted"
    const endedAt = Math.max(at, agent.startedAt ?? 0, agent.queuedAt ?? 0)
    putAgent(batch, { ...agent, state: "done", outcome, detail: unrecordedEnd, endedAt })
    batch.transitions.push({
      runId,
      agentId: agent.agentId,
      at: endedAt,
      tag: outcome,
      note: unrecordedEnd,
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
    const writer = yield* makeWriter(store, store.live === undefined ? options : { ...options, maxBuffered: 1 })
    const runs = new Map<string, Agents>()
    /** Runs started here whose end (`RunFinished` or `finishRun`) has not been recorded. */
    const open = new Set<string>()
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
        const agents = runs.get(runId) ?? slotsOf(rows, undefined)
        runs.set(runId, agents)
        return agents
      })
    }

    const live = store.live

    /** A live store takes the run's rows as they are (the ledger changes them in place from then on); a batch, by key. */
    const putAgents = (batch: Batch, runId: string, rows: ReadonlyArray<AgentRow>): void => {
      if (live === undefined) {
        for (const row of rows) putAgent(batch, row)
        return
      }
      const table = live.agents(runId)
      for (const row of rows) table.set(row.agentId, row)
    }

    const startRun = (start: RunStart) =>
      Effect.gen(function* () {
        if (runs.has(start.runId) || (yield* read("startRun", store.run(start.runId))) !== undefined) {
          return yield* new RunLedgerError({ operation: "startRun", message: `run ${start.runId} is already recorded` })
        }
        const rows = start.agents.map((a, i) =>
          newAgentRow(start.runId, a.agentId, i, a.dependsOn, a.idempotencyKey ?? null)
        )
        runs.set(start.runId, slotsOf(rows, live === undefined ? undefined : "planned"))
        open.add(start.runId)
        yield* fail("startRun")(
          writer.add((batch) => {
            batch.runs.push(runRow(start))
            putAgents(batch, start.runId, rows)
          })
        )
        yield* flush
      })

    /** An event into a row of `startRun` no event has changed yet (a `Queued` waits for the agent's next event). */
    const stepPlanned = (current: Slot, event: LedgerEvent): void => {
      if (event._tag === "Queued") {
        current.queued = event
        return
      }
      const row = current.row as MutableAgentRow
      if (current.queued !== undefined) {
        stepRow(row, current.queued)
        current.queued = undefined
      }
      stepRow(row, event)
      current.owner = "live"
    }

    /** An event into a row the live store does not hold yet: it takes the row with any event but `Queued`. */
    const stepPrivate = (live: LiveStore, current: Slot, runId: string, event: LedgerEvent): void => {
      let row = current.row as MutableAgentRow
      if (current.owner === undefined) {
        current.row = row = copyAgentRow(row)
        current.owner = "private"
      }
      stepRow(row, event)
      if (event._tag !== "Queued") {
        live.agents(runId).set(row.agentId, row)
        current.owner = "live"
      }
    }

    /** `recordIn` for a live store: the rows go straight into it, nothing is buffered. */
    const recordLive = (live: LiveStore, agents: Agents, runId: string, event: LedgerEvent): void => {
      const agentId = field(event, "agentId")
      if (typeof agentId === "string") {
        let current = agents.get(agentId)
        if (current === undefined) {
          agents.set(agentId, (current = slot(newAgentRow(runId, agentId, agents.size), "private")))
        }
        if (current.owner === "live") stepRow(current.row as MutableAgentRow, event)
        else if (current.owner === "planned") stepPlanned(current, event)
        else stepPrivate(live, current, runId, event)
        const success = successOf(runId, event, current.row)
        if (success !== undefined) live.success(success)
      }
      live.transitions(runId).push(transitionOf(runId, event))
      const run = runUpdateOf(runId, event)
      if (run !== undefined) live.updateRun(run)
    }

    const failRecord = fail("record")
    const flushRecord = failRecord(writer.flush)

    /** One event into the agent's row and the pending batch, synchronously; the effect flushes if it must. */
    const recordIn = (agents: Agents, runId: string, event: LedgerEvent): Effect.Effect<void, RunLedgerError> => {
      if (live !== undefined) {
        recordLive(live, agents, runId, event)
        return Effect.void
      }
      const agentId = field(event, "agentId")
      const batch = writer.pending()
      if (typeof agentId === "string") {
        let current = agents.get(agentId)
        if (current === undefined) {
          agents.set(agentId, (current = slot(newAgentRow(runId, agentId, agents.size), "private")))
        }
        const owner = current.owner
        let row = current.row as MutableAgentRow
        if (owner !== batch && owner !== "private") current.row = row = copyAgentRow(row)
        stepRow(row, event)
        if (owner !== batch) {
          const put = event._tag !== "Queued" || batch.agents.has(keyOf(current))
          if (put) batch.agents.set(keyOf(current), row)
          current.owner = put ? batch : "private"
        }
        const success = successOf(runId, event, row)
        if (success !== undefined) batch.successes.set(success.idempotencyKey, success)
      }
      batch.transitions.push(transitionOf(runId, event))
      const run = runUpdateOf(runId, event)
      if (run !== undefined) mergeRunUpdate(batch, run)
      const full = writer.written()
      const commitNow = event._tag === "RunFinished" || (event._tag === "Finished" && options.commitEachFinished)
      if (commitNow) return full === Effect.void ? flushRecord : failRecord(Effect.andThen(full, writer.flush))
      if (event._tag === "Finished") writer.flushSoon()
      return full === Effect.void ? Effect.void : failRecord(full)
    }

    const record = (runId: string, event: LedgerEvent) =>
      Effect.suspend(() => {
        if (event._tag === "RunFinished") open.delete(runId)
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

    /**
     * Ends the runs still open as interrupted, from the rows in memory (no read): the writer's own
     * close commits them next; a failed commit leaves them `running`, for `markCrashed` to end later.
     */
    const endUnrecorded = Effect.suspend(() =>
      Effect.gen(function* () {
        if (open.size === 0) return
        const at = yield* Clock.currentTimeMillis
        for (const runId of open) {
          const agents = [...(runs.get(runId)?.values() ?? [])].map((current) => current.row)
          yield* writer.add((batch) => unrecordedEndBatch(runId, agents, at, batch))
          runs.delete(runId)
        }
        open.clear()
      })
    ).pipe(Effect.ignore)
    yield* Effect.addFinalizer(() => endUnrecorded)

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

    const forgetSuccesses = (runId: string) => read("forgetSuccesses", store.forgetSuccesses(runId))

    const recordSuccess = (key: string, agentId: string, value: unknown, recordedAt: number) => {
      const valueJson = encodeValue(value)
      if (valueJson === null) return Effect.void
      const row = (): SuccessRow => ({
        idempotencyKey: key,
        runId: runOf(agentId, key),
        agentId,
        valueJson,
        recordedAt
      })
      if (live !== undefined) return Effect.sync(() => live.success(row()))
      return fail("record")(
        writer.add((batch) => {
          batch.successes.set(key, row())
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
      finishRun: (runId, status, endedAt) =>
        Effect.andThen(
          Effect.sync(() => open.delete(runId)),
          Effect.andThen(update("finishRun", runId, { status, endedAt }), flush)
        ),
      flush,
      listRuns,
      getRun,
      latestUnfinished,
      markCrashed,
      cachedSuccess,
      forgetSuccesses,
      recordSuccess,
      stats: Effect.sync(() => ({ ...stats }))
    } satisfies Service
  })
