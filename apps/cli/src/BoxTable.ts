/**
 * The summary's box table. A table whose cells are lines of printable ASCII that fit their columns
 * (the usual summary: ids, outcome words, times) is drawn here, the same characters `cli-table3`
 * draws for it; any other is drawn by `cli-table3`, loaded then. `cli-table3` costs ≈ 6 ms of CPU to
 * load and ≈ 6 ms to draw even a small table (it measures every cell with `string-width`), on
 * every `corral run` (`BoxTable.test.ts` checks that both draw the same table).
 *
 * @since 0.1.0
 */
import { createRequire } from "node:module"

const require = createRequire(import.meta.url)

/**
 * What to draw: a header row, rows of cells (a cell may hold several lines), each column's width
 * (borders excluded, one space of padding on each side included), and whether to color the header
 * (cyan) and the borders (grey).
 *
 * @since 0.1.0
 * @category models
 */
export interface Spec {
  readonly head: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<string>>
  readonly widths: ReadonlyArray<number>
  readonly color: boolean
}

const isPrintableAscii = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x20 || code > 0x7e) return false
  }
  return true
}

const fits = (cell: string, width: number) =>
  cell.split("\n").every((line) => isPrintableAscii(line) && line.length <= width - 2)

const grey = (text: string, color: boolean) => (color ? `\u001b[90m${text}\u001b[39m` : text)

const rule = (spec: Spec, [left, middle, right]: readonly [string, string, string]) =>
  spec.widths
    .map((width, i) =>
      grey(`${i === 0 ? left : middle}${"─".repeat(width)}${i === spec.widths.length - 1 ? right : ""}`, spec.color)
    )
    .join("")

const row = (spec: Spec, cells: ReadonlyArray<string>, head: boolean) => {
  const lines = cells.map((cell) => cell.split("\n"))
  const height = Math.max(1, ...lines.map((cell) => cell.length))
  const bar = grey("│", spec.color)
  return Array.from({ length: height }, (_, at) => {
    const drawn = spec.widths.map((width, i) => {
      const text = ` ${(lines[i]?.[at] ?? "").padEnd(width - 2)} `
      return head && spec.color ? `\u001b[36m${text}\u001b[39m` : text
    })
    return `${bar}${drawn.join(bar)}${bar}`
  })
}

const drawn = (spec: Spec): string =>
  [
    rule(spec, ["┌", "┬", "┐"]),
    ...row(spec, spec.head, true),
    ...spec.rows.flatMap((cells) => row(spec, cells, false)),
    rule(spec, ["└", "┴", "┘"])
  ].join("\n")

/**
 * The table as `cli-table3` draws it with no lines between rows.
 *
 * @since 0.1.0
 * @category rendering
 */
export const withLibrary = (spec: Spec): string => {
  const Table = require("cli-table3") as typeof import("cli-table3")
  const table = new Table({
    head: [...spec.head],
    style: { head: spec.color ? ["cyan"] : [], border: spec.color ? ["grey"] : [] },
    chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" },
    colWidths: [...spec.widths]
  })
  for (const cells of spec.rows) table.push([...cells])
  return table.toString()
}

/**
 * The table: drawn here when every cell fits its column in printable ASCII, else by `cli-table3`.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (spec: Spec): string =>
  [spec.head, ...spec.rows].every((cells) => cells.every((cell, i) => fits(cell, spec.widths[i] ?? 0))) &&
  spec.head.length === spec.widths.length &&
  spec.rows.every((cells) => cells.length === spec.widths.length)
    ? drawn(spec)
    : withLibrary(spec)
