/**
 * Delivery of a run's events to its `onEvent` subscriber, on the subscriber's own fiber.
 *
 * Events wait in a queue; at most `buffer` of them, so a stalled subscriber costs bounded memory.
 * While the buffer is full new events are dropped and counted, and the subscriber gets one
 * `EventsDropped` with the count before the next event that fits. `RunFinished` is never dropped.
 * A subscriber that fails, or returns something that is not an effect, is detached with a warning;
 * the run goes on (a promise it returned is dropped, its rejection ignored).
 *
 * Agents that never yield would keep the subscriber's fiber from running until the run ends, so
 * emitters run `catchUp` after each agent (the run after each `Queued`): once the buffer is half
 * full, an emitter whose subscriber waits for events waits until it has taken them (it takes them
 * as soon as it runs), then yields once more (waking it resumes the emitter at once, before the
 * subscriber has handled what it took); a busy subscriber gets a yield per `buffer / 64` events
 * queued, until one finds that it took nothing meanwhile: then none until it takes events again,
 * so a stalled subscriber does not slow the agents.
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type { CorralEvent, Progress } from "../CorralEvent.ts"
import type * as Outcome from "../Outcome.ts"
import { describe } from "./describe.ts"
import type { Lifecycle } from "./lifecycle.ts"

/** The subscriber returned something other than an effect (a plain or `async` callback). */
class SubscriberNotAnEffect extends Data.TaggedError("SubscriberNotAnEffect")<{
  readonly event: string
  readonly got: string
}> {
  override get message() {
    return `onEvent returned ${this.got} for ${this.event}, not an effect: return an effect (Effect.void, or wrap the work in Effect.sync)`
  }
}

/**
 * Detaches a subscriber that returned `handled`, not an effect. An `async` subscriber's promise is
 * dropped with it, so its rejection is ignored: unhandled, Node would end the process.
 */
const notAnEffect = (event: CorralEvent, handled: unknown): Effect.Effect<never> => {
  if (handled instanceof Promise) handled.catch(() => {})
  return Effect.die(new SubscriberNotAnEffect({ event: event._tag, got: describe(handled) }))
}

export interface Base {
  readonly runId: string
  readonly at: number
  readonly progress: Progress
}

export class EventSink {
  private readonly queue: Queue.Queue<CorralEvent, Cause.Done>
  private readonly runId: string
  private readonly clock: Clock.Clock
  private readonly lifecycle: Lifecycle
  private readonly buffer: number
  private backlog = 0
  private dropped = 0
  /** Events taken by the subscriber so far, and that count when a yield for it found no progress. */
  private taken = 0
  private stalledAt = Number.NaN
  /** The subscriber waits for events; `took` completes when it has taken them. */
  private idle = false
  /** Events queued so far, and that count at the last yield to a busy subscriber. */
  private offered = 0
  private offeredAtYield = Number.NEGATIVE_INFINITY
  /** A busy subscriber gets a yield per this many events: it handles far more per turn. */
  private readonly yieldEvery: number
  private took: Deferred.Deferred<void> | undefined = undefined

  constructor(
    queue: Queue.Queue<CorralEvent, Cause.Done>,
    runId: string,
    clock: Clock.Clock,
    lifecycle: Lifecycle,
    buffer: number
  ) {
    this.queue = queue
    this.runId = runId
    this.clock = clock
    this.lifecycle = lifecycle
    this.buffer = buffer
    this.yieldEvery = Math.max(1, Math.floor(buffer / 64))
  }

  /** Fields every event has: the run, the time and the progress after the event. */
  base(): Base {
    return { runId: this.runId, at: this.clock.currentTimeMillisUnsafe(), progress: this.lifecycle.progress() }
  }

  /** `Started` at `at`, built without the intermediate `base()` object. */
  started(agentId: string, at: number): CorralEvent {
    return { _tag: "Started", runId: this.runId, at, progress: this.lifecycle.progress(), agentId }
  }

  /** `Queued`: the run queues every agent at once, so its `Queued` events share one `progress`. */
  queued(agentId: string, at: number, progress: Progress): CorralEvent {
    return { _tag: "Queued", runId: this.runId, at, progress, agentId }
  }

  /** `Finished`, at the time the outcome ended (outcomes are recorded as they end). */
  finished(agentId: string, outcome: Outcome.Outcome): CorralEvent {
    return {
      _tag: "Finished",
      runId: this.runId,
      at: outcome.endedAt,
      progress: this.lifecycle.progress(),
      agentId,
      outcome
    }
  }

  /**
   * Whether an event emitted now would be queued; when not, it is counted as dropped. Frequent
   * events check this before they are built, so a full buffer costs them nothing but the count.
   */
  admit(): boolean {
    if (this.backlog >= this.buffer || (this.dropped > 0 && this.backlog + 1 >= this.buffer)) {
      this.dropped++
      return false
    }
    return true
  }

  /**
   * What an emitter waits for so that the subscriber catches up (see the module comment), or
   * `undefined` while the buffer is less than half full.
   */
  catchUp(): Effect.Effect<void> | undefined {
    if (this.backlog * 2 < this.buffer) return undefined
    if (this.idle) return Effect.andThen(Deferred.await((this.took ??= Deferred.makeUnsafe<void>())), Effect.yieldNow)
    if (this.taken === this.stalledAt || this.offered - this.offeredAtYield < this.yieldEvery) return undefined
    this.offeredAtYield = this.offered
    return this.yieldOnce
  }

  /** Yields once; a subscriber that took nothing meanwhile is stalled until it takes events. */
  private readonly yieldOnce: Effect.Effect<void> = Effect.suspend(() => {
    const before = this.taken
    return Effect.map(Effect.yieldNow, () => {
      if (this.taken === before) this.stalledAt = before
    })
  })

  emit(event: CorralEvent): void {
    if (this.backlog >= this.buffer || (this.dropped > 0 && this.backlog + 1 >= this.buffer)) {
      this.dropped++
      return
    }
    this.flushDropped()
    this.offer(event)
  }

  /** The last event of the run: never dropped. */
  final(event: CorralEvent): void {
    this.flushDropped()
    this.offer(event)
    Queue.endUnsafe(this.queue)
  }

  /** Delivers events until `final`; runs on its own fiber, taking whatever has queued at once. */
  consume(onEvent: (event: CorralEvent) => Effect.Effect<void, unknown>): Effect.Effect<void> {
    // biome-ignore lint/complexity/noUselessThisAlias: the effects below outlive this call
    const sink = this
    let broken = false
    let batch: ReadonlyArray<CorralEvent> = []
    let next = 0
    // One loop effect for every event: no effect is built per event but the subscriber's own.
    const deliver: Effect.Effect<void, unknown> = Effect.whileLoop({
      while: () => {
        while (broken && next < batch.length) {
          next++
          sink.backlog--
          sink.taken++
        }
        return next < batch.length
      },
      body: () => {
        const event = batch[next++]!
        sink.backlog--
        sink.taken++
        const handled = onEvent(event)
        return Effect.isEffect(handled) ? handled : notAnEffect(event, handled)
      },
      step: () => {}
    })
    const guarded: Effect.Effect<void> = Effect.catchCause(deliver, (cause) =>
      Effect.suspend(() => {
        broken = true
        return Effect.andThen(
          Effect.logWarning("corral: the event subscriber failed and was detached", Cause.pretty(cause)),
          guarded
        )
      })
    )
    const takeAll = Queue.takeAll(this.queue)
    const take = Effect.suspend(() => {
      sink.idle = true
      return Effect.flatMap(takeAll, (events) => {
        sink.idle = false
        const took = sink.took
        if (took !== undefined) {
          sink.took = undefined
          Deferred.doneUnsafe(took, Effect.void)
        }
        batch = events
        next = 0
        return guarded
      })
    })
    return Effect.forever(take, { disableYield: true }).pipe(Effect.catchCause(() => Effect.void))
  }

  private offer(event: CorralEvent): void {
    this.backlog++
    this.offered++
    Queue.offerUnsafe(this.queue, event)
  }

  private flushDropped(): void {
    if (this.dropped === 0) return
    const count = this.dropped
    this.dropped = 0
    this.offer({ _tag: "EventsDropped", ...this.base(), count })
  }
}
