/**
 * How the `corral` process runs its command: as `NodeRuntime.runMain` does (the exit code from the
 * program's exit; SIGINT or SIGTERM interrupts the program), except that a signal the command listens
 * for itself is left to it. `corral run` does (`StopRequests`): it stops its agents, cleans up and
 * picks its exit code — 130 when the signal stopped the run, the run's own when the run had already
 * finished. `NodeRuntime.runMain` interrupts on every signal, so a signal after the run's end made a
 * run the ledger records as succeeded exit 130.
 *
 * @since 0.1.0
 */
import * as Runtime from "effect/Runtime"

const signals = ["SIGINT", "SIGTERM"] as const

/**
 * @since 0.1.0
 * @category running
 */
export const runMain = Runtime.makeRunMain(({ fiber, teardown }) => {
  let received = false
  const onSignal = (signal: NodeJS.Signals) => {
    received = true
    if (process.listenerCount(signal) === 1) fiber.interruptUnsafe(fiber.id)
  }
  fiber.addObserver((exit) => {
    for (const signal of signals) process.off(signal, onSignal)
    teardown(exit, (code) => {
      if (received || code !== 0) process.exit(code)
    })
  })
  for (const signal of signals) process.on(signal, onSignal)
})
