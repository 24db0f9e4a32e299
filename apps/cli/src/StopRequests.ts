/**
 * How a user stops `corral run`: Ctrl-C, SIGTERM or a closed output (`corral run … | head`). The
 * listeners are installed when the command starts, before the ledger, the plan's inputs or any
 * workspace, so a stop asked for while the run is being prepared is not lost: the run then starts with
 * its stop already requested, cancels its agents and records why. Until the run's reporter exists the
 * notice goes to stderr.
 *
 * @since 0.1.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as OutputGuard from "./OutputGuard.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface StopRequests {
  /** Done with the reason at the first request. */
  readonly stop: Deferred.Deferred<string>
  /** Prints the notices of later requests through the run's reporter. */
  readonly attach: (reporter: { readonly note: (message: string) => void }) => void
}

const listen = (stop: Deferred.Deferred<string>) => {
  let note = (message: string) => OutputGuard.write(process.stderr, `${message}\n`)
  let count = 0
  const onSignal = (signal: NodeJS.Signals) => {
    count++
    if (count === 1) {
      note(`${signal === "SIGINT" ? "Ctrl-C" : signal}: stopping agents and cleaning up…`)
      Deferred.doneUnsafe(stop, Effect.succeed(signal === "SIGINT" ? "interrupted (Ctrl-C)" : `received ${signal}`))
    } else {
      note("cleanup in progress: agents are being stopped and workspaces cleaned; corral exits when done")
    }
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  const offClosed = OutputGuard.onClosed(() => {
    count++
    note("output closed: stopping agents and cleaning up…")
    Deferred.doneUnsafe(stop, Effect.succeed("output closed"))
  })
  const attach: StopRequests["attach"] = (reporter) => {
    note = reporter.note
  }
  return { onSignal, offClosed, attach }
}

/**
 * Listens for stop requests until the scope closes: the first SIGINT/SIGTERM or a closed output
 * completes `stop`; a second signal only prints that cleanup runs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const stop = yield* Deferred.make<string>()
  const { attach } = yield* Effect.acquireRelease(
    Effect.sync(() => listen(stop)),
    ({ onSignal, offClosed }) =>
      Effect.sync(() => {
        process.off("SIGINT", onSignal)
        process.off("SIGTERM", onSignal)
        offClosed()
      })
  )
  return { stop, attach } satisfies StopRequests
})
