/**
 * How a user stops `corral run`: Ctrl-C, SIGTERM, SIGHUP (its terminal closed: Node's default would
 * end the process at once, leaving agents, worktrees and the lease behind) or a closed output
 * (`corral run … | head`). The listeners are installed when the command starts, before the ledger,
 * the plan's inputs or any workspace, so a stop asked for while the run is being prepared is not
 * lost: the run then starts with its stop already requested, cancels its agents and records why.
 * Until the run's reporter exists the notice goes to stderr.
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
  /** Done at the second request (a cluster run's coordinator then stops waiting for its runners). */
  readonly again: Deferred.Deferred<void>
  /** Prints the notices of later requests through the run's reporter. */
  readonly attach: (reporter: { readonly note: (message: string) => void }) => void
  /**
   * The exit code of a run the first signal stopped: 130 after Ctrl-C or SIGTERM, 129 after SIGHUP
   * (128 + 1); `undefined` without a signal. A run that finished before it saw the request keeps its own.
   */
  readonly exitCode: () => number | undefined
}

const signals: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGTERM", "SIGHUP"]

const listen = (stop: Deferred.Deferred<string>, again: Deferred.Deferred<void>) => {
  let note = (message: string) => OutputGuard.write(process.stderr, `${message}\n`)
  let count = 0
  let first: NodeJS.Signals | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    count++
    if (count === 1) {
      first = signal
      note(`${signal === "SIGINT" ? "Ctrl-C" : signal}: stopping agents and cleaning up…`)
      Deferred.doneUnsafe(stop, Effect.succeed(signal === "SIGINT" ? "interrupted (Ctrl-C)" : `received ${signal}`))
    } else {
      note("cleanup in progress: agents are being stopped and workspaces cleaned; corral exits when done")
      Deferred.doneUnsafe(again, Effect.void)
    }
  }
  for (const signal of signals) process.on(signal, onSignal)
  const offClosed = OutputGuard.onClosed(() => {
    count++
    note("output closed: stopping agents and cleaning up…")
    Deferred.doneUnsafe(stop, Effect.succeed("output closed"))
  })
  const attach: StopRequests["attach"] = (reporter) => {
    note = reporter.note
  }
  return {
    onSignal,
    offClosed,
    attach,
    exitCode: () => (first === undefined ? undefined : first === "SIGHUP" ? 129 : 130)
  }
}

/** After the run: its outcome, summary and exit code stand; corral only stops its helpers and exits. */
const onSignalAfterRun = () => OutputGuard.write(process.stderr, "the run has ended: corral is exiting\n")

/**
 * Listens for stop requests until the scope closes: the first SIGINT/SIGTERM/SIGHUP or a closed
 * output completes `stop`; a second signal prints that cleanup runs and completes `again`. A signal after the scope
 * closed (the run ended) only prints that corral is exiting, until the process exits (the exit's
 * teardown is bounded: the spawn helper's stop waits at most 2 s).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const stop = yield* Deferred.make<string>()
  const again = yield* Deferred.make<void>()
  const { attach, exitCode } = yield* Effect.acquireRelease(
    Effect.sync(() => listen(stop, again)),
    ({ onSignal, offClosed }) =>
      Effect.sync(() => {
        for (const signal of signals) {
          process.off(signal, onSignal)
          if (!process.listeners(signal).includes(onSignalAfterRun)) process.on(signal, onSignalAfterRun)
        }
        offClosed()
      })
  )
  return { stop, again, attach, exitCode } satisfies StopRequests
})
