/**
 * A stop request while Node still loads corral's modules (the first 100–150 ms of a command): Node's
 * default action would end the process by the signal (the shell sees 143 for SIGTERM, and SIGHUP
 * was lost once `main.ts`'s forwarder existed). The bin installs these handlers before it loads
 * anything, so Node queues a signal for JavaScript instead. One dispatched before `main.ts` hands
 * over to its own (`RunMain`, then the command's) ends the process at once with corral's exit code —
 * 130 for SIGINT and SIGTERM, 129 for SIGHUP — before the command started anything or wrote a line
 * (the spawn helper the bin may have started ends when its standard input closes). Node dispatches
 * signals between turns of its event loop, which module loading mostly does not yield to: one that
 * arrived meanwhile reaches the command's handlers, which stop the command as they do any signal.
 *
 * @since 0.1.0
 */

const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const

const exitAtOnce = (signal: NodeJS.Signals) => process.exit(signal === "SIGHUP" ? 129 : 130)

/**
 * Ends the process with corral's exit code on SIGINT, SIGTERM or SIGHUP until {@link handOver}.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const install = (): void => {
  for (const signal of signals) process.on(signal, exitAtOnce)
}

/**
 * Removes the handlers of {@link install}; call it once the command's own are installed (`RunMain`),
 * in the same tick. A signal that arrived while the modules loaded without a turn of the event loop
 * is dispatched after this, to those: removing a signal's last listener first would drop it.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const handOver = (): void => {
  for (const signal of signals) process.off(signal, exitAtOnce)
}
