/**
 * The deadlines of a provider's calls (or of its streams' pulls: an idle timeout is a deadline per
 * pull), served by one sleeper fiber per provider (per layer) and duration instead
 * of `Effect.timeoutOrElse`, which forks the call and a sleeper and sets a timer on every call: here
 * a call forks only itself. Every deadline is the same duration after its call started, on a
 * monotonic clock, so the calls pending are in deadline order in a `Set` (insertion order). The
 * sleeper sleeps on the `Clock` in context when the provider is built (TestClock drives it) until
 * the first pending deadline, interrupts every call whose deadline passed (the HTTP client aborts an
 * interrupted fiber's request) and sleeps again until the next one; with none pending it waits
 * without a timer. So it keeps at most one timer, and one set for a call that already ended stays
 * until that call's deadline. The sleeper runs in the provider's scope and ends with it.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"

export interface Deadlines {
  /**
   * `effect` within the deadline, run in a fiber of its own; past the deadline that fiber is
   * interrupted and, once it has ended, the call fails with `late()`.
   */
  readonly within: <A, E, E2>(effect: Effect.Effect<A, E>, late: () => E2) => Effect.Effect<A, E | E2>
}

interface Pending {
  readonly at: number
  readonly expire: () => void
}

export const make = (ms: number): Effect.Effect<Deadlines, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const pending = new Set<Pending>()
    let wake: (() => void) | undefined
    const now = () => Number(clock.monotonicTimeNanosUnsafe()) / 1e6
    /** Expires the passed deadlines; the milliseconds until the next one, if any is pending. */
    const expirePassed = (): number | undefined => {
      const time = now()
      for (const entry of pending) {
        if (entry.at > time) return entry.at - time
        pending.delete(entry)
        entry.expire()
      }
      return undefined
    }
    const idle = Effect.callback<void>((resume) => {
      wake = () => {
        wake = undefined
        resume(Effect.void)
      }
    })
    const step = Effect.suspend(() => {
      const wait = expirePassed()
      return wait === undefined ? idle : clock.sleep(Duration.millis(wait))
    })
    yield* Effect.forkScoped(Effect.forever(step))
    const within = <A, E, E2>(effect: Effect.Effect<A, E>, late: () => E2): Effect.Effect<A, E | E2> =>
      Effect.flatMap(Effect.forkChild(effect, { startImmediately: true }), (call) =>
        Effect.callback<A, E | E2>((resume) => {
          let passed = false
          const entry: Pending = {
            at: now() + ms,
            expire: () => {
              passed = true
              call.interruptUnsafe()
            }
          }
          pending.add(entry)
          wake?.()
          call.addObserver((exit) => {
            pending.delete(entry)
            resume(passed ? Effect.fail(late()) : exit)
          })
          return Effect.suspend(() => {
            pending.delete(entry)
            return Fiber.interrupt(call)
          })
        })
      )
    return { within }
  })
