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
 * keeps the handlers until the process is gone. It discards what Node has not yet written to a pipe,
 * though (Node writes to pipes asynchronously on Linux and every POSIX system, to files and terminals
 * synchronously; Windows to terminals asynchronously — Node's "A note on process I/O"):
 * `corral logs … | (sleep 2; cat)` got 64 KiB of a 2 MiB log. So the exit waits until stdout and
 * stderr have handed everything to the system, as draining the event loop did; a SIGINT or SIGTERM
 * during that wait exits at once with the command's exit code.
 *
 * @since 0.1.0
 */
import * as Runtime from "effect/Runtime"

const signals = ["SIGINT", "SIGTERM"] as const

/** Calls `done` once `stream` has handed everything written to it to the system. */
const drained = (stream: NodeJS.WriteStream, done: () => void): void => {
  if (stream.writableLength === 0 || stream.destroyed) done()
  else stream.write("", () => done())
}

/**
 * @since 0.1.0
 * @category running
 */
export const runMain = Runtime.makeRunMain(({ fiber, teardown }) => {
  let exitCode: number | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    if (exitCode !== undefined) process.exit(exitCode)
    if (process.listenerCount(signal) === 1) fiber.interruptUnsafe(fiber.id)
  }
  fiber.addObserver((exit) => {
    teardown(exit, (code) => {
      exitCode = code
      drained(process.stdout, () => drained(process.stderr, () => process.exit(code)))
    })
  })
  for (const signal of signals) process.on(signal, onSignal)
})
