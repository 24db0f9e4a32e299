import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type * as SqlError from "effect/sql/SqlError"
import { type Batch, batchSize, emptyBatch, prependBatch } from "./ledgerModel.ts"
import type { LedgerStore } from "./ledgerStore.ts"

export interface WriterOptions {
  readonly flushEvery: Duration.Input
  readonly maxBuffered: number
  readonly flushSoon: Duration.Input
}

/**
 * Buffers writes and commits them in one store transaction per flush.
 *
 * The background fiber commits a write within `flushEvery` of it (sooner after `flushSoon`). While
 * nothing is buffered it waits for the next write instead of waking every `flushEvery`: an idle
 * ledger costs no timer (20 wake-ups a second at 50 ms, each forking the race's fibers).
 *
 * A write changes `pending()` synchronously and then runs what `written()` returns: `Effect.void`
 * (the same value every time) until the buffer is full, then a flush.
 */
export interface Writer {
  readonly pending: () => Batch
  readonly written: () => Effect.Effect<void, SqlError.SqlError>
  readonly add: (write: (batch: Batch) => void) => Effect.Effect<void, SqlError.SqlError>
  readonly flush: Effect.Effect<void, SqlError.SqlError>
  /** Asks the background fiber to flush soon, without waiting for it. */
  readonly flushSoon: () => void
}

/** With a concurrent store: how many times `maxBuffered` writes may wait before `add` waits for a flush. */
const backlog = 4

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
    const logged = Effect.catch(flush, (error) =>
      Effect.logWarning("corral: the run ledger could not flush", error.message)
    )
    let wake = Deferred.makeUnsafe<void>()
    let now = Deferred.makeUnsafe<void>()
    const signal = (immediately: boolean): void => {
      Deferred.doneUnsafe(wake, Effect.void)
      if (immediately) Deferred.doneUnsafe(now, Effect.void)
    }
    let filled = Deferred.makeUnsafe<void>()
    let idle = false
    // When the store commits on another thread, a full buffer starts a flush in the background, so the
    // commit does not hold up the caller; only a buffer that keeps growing meanwhile makes it wait.
    const written = (): Effect.Effect<void, SqlError.SqlError> => {
      if (idle) {
        idle = false
        Deferred.doneUnsafe(filled, Effect.void)
      }
      const size = batchSize(pending)
      if (size < options.maxBuffered) return Effect.void
      if (!store.concurrent || size >= options.maxBuffered * backlog) return flush
      signal(true)
      return Effect.void
    }
    const add = (write: (batch: Batch) => void) =>
      Effect.suspend(() => {
        write(pending)
        return written()
      })
    const delay = store.concurrent
      ? Effect.suspend(() => Effect.raceFirst(Effect.sleep(options.flushSoon), Deferred.await(now)))
      : Effect.sleep(options.flushSoon)
    const soon = Effect.suspend(() => Deferred.await(wake)).pipe(Effect.andThen(delay))
    const buffered = Effect.suspend(() => {
      if (batchSize(pending) > 0) return Effect.void
      idle = true
      filled = Deferred.makeUnsafe<void>()
      return Deferred.await(filled)
    })
    const tick = buffered.pipe(
      Effect.andThen(Effect.raceFirst(Effect.sleep(options.flushEvery), soon)),
      Effect.andThen(
        Effect.sync(() => {
          wake = Deferred.makeUnsafe<void>()
          now = Deferred.makeUnsafe<void>()
        })
      ),
      Effect.andThen(logged)
    )
    yield* Effect.forkScoped(Effect.forever(tick))
    yield* Effect.addFinalizer(() => logged)
    return { pending: () => pending, written, add, flush, flushSoon: () => signal(false) }
  })
