import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type * as RunLedger from "../../src/RunLedger.ts"
import type { AgentRow, Batch } from "../../src/internal/ledgerModel.ts"
import { makeLedger } from "../../src/internal/ledgerService.ts"
import { type LedgerStore, makeMemoryStore } from "../../src/internal/ledgerStore.ts"
import { ev, recordAll, start, syntheticRun } from "../contracts/RunLedgerContract.ts"

const stats = () => ({ transactions: 0, statements: 0, rows: 0 })

const options = (maxBuffered: number) => ({
  flushEvery: "1 hour" as const,
  flushSoon: "1 hour" as const,
  maxBuffered,
  commitEachFinished: false
})

/** The memory store without its live tables (so every write goes through batches), noting each agent row it takes. */
const batchedStore = (seen: Array<readonly [AgentRow, string]>): LedgerStore => {
  const { live: _live, ...store } = makeMemoryStore()
  return {
    ...store,
    apply: (batch: Batch) =>
      Effect.suspend(() => {
        for (const row of batch.agents.values()) seen.push([row, JSON.stringify(row)])
        return store.apply(batch)
      })
  }
}

const events = [...syntheticRun("r1"), ev("r1", 130, { _tag: "Queued", agentId: "late" })]

/** A planned agent queued twice before it starts. */
const requeued: ReadonlyArray<RunLedger.LedgerEvent> = [
  ev("r2", 2, { _tag: "Queued", agentId: "b" }),
  ev("r2", 3, { _tag: "Queued", agentId: "b" }),
  ev("r2", 4, { _tag: "Started", agentId: "b" })
]

describe("ledger service", () => {
  for (const maxBuffered of [1, 3, 1000]) {
    it.effect(`never changes an agent row a store has taken (batches of ${maxBuffered})`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const seen: Array<readonly [AgentRow, string]> = []
          const ledger = yield* makeLedger(batchedStore(seen), options(maxBuffered), stats())
          yield* ledger.startRun(start("r1", 0))
          yield* recordAll(ledger, "r1", events)
          yield* ledger.flush
          assert.isAbove(seen.length, 4)
          for (const [row, json] of seen) assert.strictEqual(JSON.stringify(row), json)
        })
      )
    )
  }

  it.effect("a live store reads, after every event, what a batched store reads", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const live = yield* makeLedger(makeMemoryStore(), options(1000), stats())
        const batched = yield* makeLedger(batchedStore([]), options(1000), stats())
        for (const [runId, list] of [
          ["r2", requeued],
          ["r1", events]
        ] as const) {
          for (const ledger of [live, batched]) yield* ledger.startRun(start(runId, 0))
          for (const event of list) {
            for (const ledger of [live, batched]) yield* ledger.record(runId, event)
            const [a, b] = [yield* live.getRun(runId), yield* batched.getRun(runId)]
            assert.deepStrictEqual(Option.getOrThrow(a), Option.getOrThrow(b), `after ${event._tag}`)
          }
        }
        yield* live.recordSuccess("kd", "d", { n: 4 }, 200)
        yield* batched.recordSuccess("kd", "d", { n: 4 }, 200)
        assert.deepStrictEqual(yield* live.cachedSuccess("kd"), yield* batched.cachedSuccess("kd"))
        assert.deepStrictEqual(yield* live.listRuns(), yield* batched.listRuns())
      })
    )
  )
})
