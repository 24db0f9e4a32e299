/**
 * Where the events of a run go: a live view on a terminal, one plain line per state change
 * elsewhere, or newline-delimited JSON with `--json`.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"
import * as OutputGuard from "./OutputGuard.ts"
import { plainLine, renderTty, ViewState } from "./ProgressView.ts"
import { type RunEvent, toJsonLine } from "./RunEvent.ts"
import * as TerminalText from "./TerminalText.ts"

const require = createRequire(import.meta.url)

/**
 * @since 0.1.0
 * @category models
 */
export interface Reporter {
  readonly onEvent: (event: RunEvent) => void
  readonly note: (message: string) => void
  readonly close: () => void
}

/**
 * @since 0.1.0
 * @category models
 */
export type Mode = "tty" | "plain" | "json"

/**
 * @since 0.1.0
 * @category constructors
 */
export const modeFor = (json: boolean, stream: NodeJS.WriteStream): Mode =>
  json ? "json" : TerminalText.isUsableTerminal(stream) ? "tty" : "plain"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  mode: Mode,
  agents: ReadonlyArray<{ readonly id: string; readonly dependsOn: ReadonlyArray<string> }>,
  stream: NodeJS.WriteStream = process.stdout
): Reporter => {
  switch (mode) {
    case "json":
      return {
        onEvent: (event) => OutputGuard.write(stream, `${toJsonLine(event)}\n`),
        note: (message) => OutputGuard.write(process.stderr, `${message}\n`),
        close: () => {}
      }
    case "plain":
      return plain(stream)
    case "tty":
      return live(agents, stream)
  }
}

const plain = (stream: NodeJS.WriteStream): Reporter => {
  let startedAt = Date.now()
  return {
    onEvent: (event) => {
      if (event._tag === "RunStarted") startedAt = event.at
      const line = plainLine(event, startedAt)
      if (line !== undefined) OutputGuard.write(stream, `${line}\n`)
    },
    note: (message) => OutputGuard.write(stream, `${message}\n`),
    close: () => {}
  }
}

const live = (
  agents: ReadonlyArray<{ readonly id: string; readonly dependsOn: ReadonlyArray<string> }>,
  stream: NodeJS.WriteStream
): Reporter => {
  const view = new ViewState(agents)
  // Loaded only for a live view (≈ 45 ms of CPU with its dependencies); plain and JSON output need none of it.
  const update = (require("log-update") as typeof import("log-update")).createLogUpdate(stream)
  const draw = () => {
    if (!OutputGuard.isClosed(stream)) update(renderTty(view, Date.now(), stream.columns || 80))
  }
  const timer = setInterval(draw, 100)
  let closed = false
  return {
    onEvent: (event) => view.apply(event),
    note: (message) => {
      view.notices.push(message)
      draw()
    },
    close: () => {
      if (closed) return
      closed = true
      clearInterval(timer)
      draw()
      if (!OutputGuard.isClosed(stream)) update.done()
    }
  }
}
