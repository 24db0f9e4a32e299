/**
 * How the `corral` process runs its command: as `NodeRuntime.runMain` does (the exit code from the
 * program's exit; SIGINT or SIGTERM interrupts the program), except that a signal the command listens
 * for itself is left to it. `corral run` does (`StopRequests`): it stops its agents, cleans up and
 * picks its exit code — 130 when the signal stopped the run, the run's own when the run had already
 * finished. `NodeRuntime.runMain` interrupts on every signal, so a signal after the run's end made a
 * run the ledger records as succeeded exit 130.
 *
 * The process always ends with `process.exit`, exit code 0 included. `NodeRuntime.runMain` lets a
 * successful program end by draining the event loop instead, and then Node's teardown restores the
 * default action of SIGINT and SIGTERM before it frees the heap: a signal in those last milliseconds
 * (11–430 ms between that `rt_sigaction` and `exit_group` under `strace`, 3 one-agent runs on a
 * loaded machine) killed a finished `corral run` (status 143 / 130 instead of 0). `process.exit`
 * keeps the handlers until the process is gone.
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
  const onSignal = (signal: NodeJS.Signals) => {
    if (process.listenerCount(signal) === 1) fiber.interruptUnsafe(fiber.id)
  }
  fiber.addObserver((exit) => {
    teardown(exit, (code) => process.exit(code))
  })
  for (const signal of signals) process.on(signal, onSignal)
})
