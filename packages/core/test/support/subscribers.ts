import { Deferred, Effect } from "effect"

/**
 * An `onEvent` subscriber that never returns: it completes `entered` on its first event, then
 * waits for ever, and completes `detached` when it is interrupted.
 */
export const neverReturns =
  (entered: Deferred.Deferred<void>, detached: Deferred.Deferred<void>) => (): Effect.Effect<void> =>
    Deferred.succeed(entered, undefined).pipe(
      Effect.andThen(Effect.never),
      Effect.onInterrupt(() => Deferred.succeed(detached, undefined))
    )
