import { Deferred, type Duration, Effect, type Scope, Semaphore } from "effect"
import type { SqlError } from "effect/sql"
import { type Batch, batchSize, emptyBatch, prependBatch } from "./ledgerModel.ts"
import type { LedgerStore } from "./ledgerStore.ts"

export interface WriterOptions {
  readonly flushEvery: Duration.Input
  readonly maxBuffered: number
  readonly flushSoon: Duration.Input
}

/** Buffers writes and commits them in one store transaction per flush. */
export interface Writer {
  readonly add: (write: (batch: Batch) => void) => Effect.Effect<void, SqlError.SqlError>
  readonly flush: Effect.Effect<void, SqlError.SqlError>
  /** Asks the background fiber to flush now, without waiting for it. */
  readonly flushSoon: Effect.Effect<void>
}

const isRetryable = (error: SqlError.SqlError): boolean => error.reason.isRetryable

export const makeWriter = (store: LedgerStore, options: WriterOptions): Effect.Effect<Writer, never, Scope.Scope> =>
  Effect.gen(function* () {
    let pending = emptyBatch()
    const permit = yield* Semaphore.make(1)
    const commit = Effect.suspend(() => {
      if (batchSize(pending) === 0) return Effect.void
      const batch = pending
      pending = emptyBatch()
      return Effect.tapError(store.apply(batch), (error) =>
        Effect.sync(() => {
          if (isRetryable(error)) pending = prependBatch(batch, pending)
        })
      )
    })
    const flush = permit.withPermits(1)(commit)
    const add = (write: (batch: Batch) => void) =>
      Effect.suspend(() => {
        write(pending)
        return batchSize(pending) >= options.maxBuffered ? flush : Effect.void
      })
    const logged = Effect.catch(flush, (error) =>
      Effect.logWarning("corral: the run ledger could not flush", error.message)
    )
    let wake = Deferred.makeUnsafe<void>()
    const soon = Effect.suspend(() => Deferred.await(wake)).pipe(Effect.andThen(Effect.sleep(options.flushSoon)))
    const tick = Effect.raceFirst(Effect.sleep(options.flushEvery), soon).pipe(
      Effect.andThen(Effect.sync(() => (wake = Deferred.makeUnsafe<void>()))),
      Effect.andThen(logged)
    )
    yield* Effect.forkScoped(Effect.forever(tick))
    yield* Effect.addFinalizer(() => logged)
    const flushSoon = Effect.sync(() => {
      Deferred.doneUnsafe(wake, Effect.void)
    })
    return { add, flush, flushSoon }
  })
