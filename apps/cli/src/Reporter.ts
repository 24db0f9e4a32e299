/**
 * Where the events of a run go: a live view on a terminal, one plain line per state change
 * elsewhere, or newline-delimited JSON with `--json`.
 *
 * @since 0.1.0
 */
import { createLogUpdate } from "log-update"
import { plainLine, renderTty, ViewState } from "./ProgressView.ts"
import { type RunEvent, toJsonLine } from "./RunEvent.ts"

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
  json ? "json" : stream.isTTY ? "tty" : "plain"

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
        onEvent: (event) => stream.write(`${toJsonLine(event)}\n`),
        note: (message) => process.stderr.write(`${message}\n`),
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
      if (line !== undefined) stream.write(`${line}\n`)
    },
    note: (message) => stream.write(`${message}\n`),
    close: () => {}
  }
}

const live = (
  agents: ReadonlyArray<{ readonly id: string; readonly dependsOn: ReadonlyArray<string> }>,
  stream: NodeJS.WriteStream
): Reporter => {
  const view = new ViewState(agents)
  const update = createLogUpdate(stream)
  const draw = () => update(renderTty(view, Date.now(), stream.columns ?? 100))
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
      update.done()
    }
  }
}
