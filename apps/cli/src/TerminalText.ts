/**
 * Text for a terminal: agents' output cleaned of control sequences (so an agent cannot move the
 * cursor, recolor or retitle the user's terminal), and measured in display columns (wide and
 * combining characters) with `string-width`, so rows stay aligned.
 *
 * Text of printable ASCII alone (ids, outcomes, paths, most messages) is measured and wrapped here:
 * one column per character. `string-width` and `wrap-ansi` (≈ 30 ms of CPU to load, with
 * `Intl.Segmenter`) are loaded on the first text that needs them.
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"
import stripAnsi from "strip-ansi"

const require = createRequire(import.meta.url)
let stringWidthOf: ((text: string) => number) | undefined
let wrapAnsiOf: typeof import("wrap-ansi").default | undefined

const stringWidth = (text: string): number =>
  (stringWidthOf ??= (require("string-width") as typeof import("string-width")).default)(text)

const wrapAnsi: typeof import("wrap-ansi").default = (text, columns, options) =>
  (wrapAnsiOf ??= (require("wrap-ansi") as typeof import("wrap-ansi")).default)(text, columns, options)

/** Whether every character is printable ASCII (U+0020–U+007E): one terminal column each, no escapes. */
const isPrintableAscii = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x20 || code > 0x7e) return false
  }
  return true
}

/** `wrap-ansi` with `trim: true`, which leaves a printable ASCII line that fits trimmed only. */
const wrapTrimmed = (text: string, columns: number, hard: boolean): string =>
  text.length <= columns && isPrintableAscii(text) ? text.trim() : wrapAnsi(text, columns, { hard, trim: true })

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const controls = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

/**
 * The text with ANSI escape sequences removed, tabs and other control characters turned into
 * spaces, and surrounding blanks trimmed.
 *
 * @example
 * ```ts
 * import * as TerminalText from "./TerminalText.ts"
 *
 * TerminalText.clean("\u001b[31mred\u001b[0m\u0007") // "red"
 * ```
 * @since 0.1.0
 * @category text
 */
export const clean = (text: string): string => stripAnsi(text).replace(/\t/g, " ").replace(controls, "").trim()

/**
 * The number of terminal columns `text` takes.
 *
 * @since 0.1.0
 * @category text
 */
export const width = (text: string): number => (isPrintableAscii(text) ? text.length : stringWidth(text))

/**
 * `text` cut to at most `columns` display columns, with `…` marking a cut.
 *
 * @since 0.1.0
 * @category text
 */
export const fit = (text: string, columns: number): string => {
  if (width(text) <= columns) return text
  let out = ""
  let used = 0
  for (const char of text) {
    const w = width(char)
    if (used + w > columns - 1) break
    out += char
    used += w
  }
  return `${out}…`
}

/**
 * `text` padded with spaces to `columns` display columns.
 *
 * @since 0.1.0
 * @category text
 */
export const pad = (text: string, columns: number): string => text + " ".repeat(Math.max(0, columns - width(text)))

/**
 * Whether a stream is a terminal with a usable size: some CI and `script` set-ups report 0×0.
 *
 * @since 0.1.0
 * @category terminals
 */
export const isUsableTerminal = (stream: NodeJS.WriteStream): boolean =>
  stream.isTTY === true && (stream.columns ?? 0) > 0 && (stream.rows ?? 0) > 0

/**
 * Prose wrapped at word boundaries to `columns`; a word longer than a line is left whole (so a
 * path or branch stays copyable).
 *
 * @since 0.1.0
 * @category text
 */
export const wrap = (text: string, columns: number): string => wrapTrimmed(text, Math.max(20, columns), false)

/**
 * Text wrapped to exactly `columns`: at word boundaries, and inside words longer than a line.
 *
 * @since 0.1.0
 * @category text
 */
export const wrapHard = (text: string, columns: number): string => wrapTrimmed(text, Math.max(1, columns), true)
