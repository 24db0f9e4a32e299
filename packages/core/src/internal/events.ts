/**
 * Delivery of a run's events to its `onEvent` subscriber, on the subscriber's own fiber.
 *
 * Events wait in a queue; at most `buffer` of them, so a stalled subscriber costs bounded memory.
 * While the buffer is full new events are dropped and counted, and the subscriber gets one
 * `EventsDropped` with the count before the next event that fits. `RunFinished` is never dropped.
 * A subscriber that fails is detached with a warning; the run goes on.
 */
import * as Cause from "effect/Cause"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type { CorralEvent, Progress } from "../CorralEvent.ts"
import type { Lifecycle } from "./lifecycle.ts"

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
  }

  /** Fields every event has: the run, the time and the progress after the event. */
  base(): Base {
    return { runId: this.runId, at: this.clock.currentTimeMillisUnsafe(), progress: this.lifecycle.progress() }
  }

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

  /** Delivers events until `final`; runs on its own fiber. */
  consume(onEvent: (event: CorralEvent) => Effect.Effect<void, unknown>): Effect.Effect<void> {
    let broken = false
    const deliver = (event: CorralEvent): Effect.Effect<void> => {
      this.backlog--
      if (broken) return Effect.void
      return onEvent(event).pipe(
        Effect.catchCause((cause) =>
          Effect.suspend(() => {
            broken = true
            return Effect.logWarning("corral: the event subscriber failed and was detached", Cause.pretty(cause))
          })
        )
      )
    }
    return Effect.forever(Effect.flatMap(Queue.take(this.queue), deliver)).pipe(Effect.catchCause(() => Effect.void))
  }

  private offer(event: CorralEvent): void {
    this.backlog++
    Queue.offerUnsafe(this.queue, event)
  }

  private flushDropped(): void {
    if (this.dropped === 0) return
    const count = this.dropped
    this.dropped = 0
    this.offer({ _tag: "EventsDropped", ...this.base(), count })
  }
}
