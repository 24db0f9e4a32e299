/**
 * Text for a terminal: agents' output cleaned of control sequences (so an agent cannot move the
 * cursor, recolor or retitle the user's terminal), and measured in display columns (wide and
 * combining characters) with `string-width`, so rows stay aligned.
 *
 * @since 0.1.0
 */
import stringWidth from "string-width"
import stripAnsi from "strip-ansi"
import wrapAnsi from "wrap-ansi"

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
export const width = (text: string): number => stringWidth(text)

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
export const wrap = (text: string, columns: number): string =>
  wrapAnsi(text, Math.max(20, columns), { hard: false, trim: true })

/**
 * Text wrapped to exactly `columns`: at word boundaries, and inside words longer than a line.
 *
 * @since 0.1.0
 * @category text
 */
export const wrapHard = (text: string, columns: number): string =>
  wrapAnsi(text, Math.max(1, columns), { hard: true, trim: true })
