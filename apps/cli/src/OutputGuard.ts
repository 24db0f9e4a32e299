/**
 * What corral does when its reader goes away (`corral run … | head`): a closed stdout or stderr is
 * a stop request, never a crash. Node ignores SIGPIPE, so a closed pipe surfaces as an `EPIPE`
 * error event on the stream at corral's next write; without a listener that event would end the
 * process with a stack trace and leave agents, worktrees and the ledger behind.
 *
 * While a run is in progress its handler stops the run (like Ctrl-C) and the command exits
 * {@link exitCode}; any other command just exits quietly with that code.
 *
 * @since 0.1.0
 */

/**
 * The exit code after the output was closed: 128 + SIGPIPE, as a shell reports a program killed by it.
 *
 * @since 0.1.0
 * @category constants
 */
export const exitCode = 141

const closedStreams = new Set<NodeJS.WriteStream>()
const handlers: Array<() => void> = []
let installed = false

/** Any write error counts: `EPIPE` from a closed pipe, `EIO` from a closed terminal, a destroyed stream. */
const onError = (stream: NodeJS.WriteStream) => () => {
  const first = closedStreams.size === 0
  closedStreams.add(stream)
  if (!first) return
  const handler = handlers.at(-1)
  if (handler === undefined) process.exit(exitCode)
  handler()
}

/**
 * Listens for a closed stdout and stderr for the rest of the process. Call once at start-up.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const install = (): void => {
  if (installed) return
  installed = true
  process.stdout.on("error", onError(process.stdout))
  process.stderr.on("error", onError(process.stderr))
}

/**
 * Whether stdout or stderr was closed by its reader.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const isClosed = (stream?: NodeJS.WriteStream): boolean =>
  stream === undefined ? closedStreams.size > 0 : closedStreams.has(stream)

/**
 * Writes unless the stream's reader is gone (then the text has nowhere to go).
 *
 * @since 0.1.0
 * @category writing
 */
export const write = (stream: NodeJS.WriteStream, text: string): void => {
  if (closedStreams.has(stream) || stream.destroyed) return
  stream.write(text)
}

/**
 * Makes `handler` the reaction to a closed output until the returned function is called.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const onClosed = (handler: () => void): (() => void) => {
  install()
  handlers.push(handler)
  if (closedStreams.size > 0) handler()
  return () => {
    const index = handlers.lastIndexOf(handler)
    if (index >= 0) handlers.splice(index, 1)
  }
}
