import type { CaseResult, Column } from "./types.ts"

export const duration = (ms: number): string => {
  if (ms >= 10_000) return `${(ms / 1000).toFixed(2)} s`
  if (ms >= 1000) return `${(ms / 1000).toFixed(3)} s`
  if (ms >= 100) return `${ms.toFixed(1)} ms`
  if (ms >= 1) return `${ms.toFixed(2)} ms`
  return `${(ms * 1000).toFixed(0)} µs`
}

export const fixed =
  (digits: number, unit = "") =>
  (value: number): string =>
    `${value.toFixed(digits)}${unit}`

export const bytes = (value: number): string => {
  if (value >= 1024 * 1024) return `${(value / 1024 / 1024).toFixed(1)} MB`
  if (value >= 10 * 1024) return `${(value / 1024).toFixed(1)} KB`
  return `${value.toFixed(0)} B`
}

export const integer = (value: number): string => Math.round(value).toLocaleString("en-US")

const short = (message: string): string => {
  const line = message.split("\n")[0] ?? ""
  return line.length > 110 ? `${line.slice(0, 107)}...` : line
}

const hasFloor = (result: CaseResult): boolean => result.boundMs !== undefined || result.floorApproach !== undefined

const rowsOf = (result: CaseResult, columns: ReadonlyArray<Column>): Array<Array<string>> =>
  result.approaches.map((a) => {
    if (a.error !== undefined) return [a.name, a.error.startsWith("n/a") ? a.error : `failed: ${short(a.error)}`]
    const range = a.minMs === undefined ? "" : `${duration(a.minMs)} – ${duration(a.maxMs!)}`
    const ratio = a.ratio === undefined ? "—" : `${a.ratio.toFixed(2)}×`
    const extra = columns.map((c) => (c.key in a.metrics ? c.format(a.metrics[c.key]!) : "—"))
    const head = [a.name, a.medianMs === undefined ? "—" : duration(a.medianMs), range]
    return [...head, ...(hasFloor(result) ? [ratio] : []), ...extra]
  })

const widths = (rows: ReadonlyArray<ReadonlyArray<string>>, header: ReadonlyArray<string>): Array<number> =>
  header.map((h, i) => Math.max(h.length, ...rows.filter((r) => r.length > 2).map((r) => (r[i] ?? "").length)))

const line = (cells: ReadonlyArray<string>, sizes: ReadonlyArray<number>): string =>
  cells.map((cell, i) => (i === 0 ? cell.padEnd(sizes[i]!) : cell.padStart(sizes[i]!))).join("  ")

export const table = (result: CaseResult, columns: ReadonlyArray<Column>): string => {
  const floor = result.boundMs === undefined ? "× floor" : "× bound"
  const header = [
    "approach",
    "median",
    "min – max",
    ...(hasFloor(result) ? [floor] : []),
    ...columns.map((c) => c.label)
  ]
  const rows = rowsOf(result, columns)
  const sizes = widths(rows, header)
  const body = rows.map((row) => (row.length === 2 ? `${row[0]!.padEnd(sizes[0]!)}  ${row[1]}` : line(row, sizes)))
  const rule = "-".repeat(sizes.reduce((sum, size) => sum + size + 2, -2))
  return [line(header, sizes), rule, ...body].join("\n")
}

const cell = (value: unknown): string =>
  typeof value === "number" ? value.toLocaleString("en-US", { maximumFractionDigits: 2 }) : String(value)

export const recordsTable = (rows: ReadonlyArray<Readonly<Record<string, unknown>>>): string => {
  const header = [...new Set(rows.flatMap((row) => Object.keys(row)))]
  const body = rows.map((row) => header.map((key) => cell(row[key])))
  const sizes = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)))
  const rule = "-".repeat(sizes.reduce((sum, size) => sum + size + 2, -2))
  return [line(header, sizes), rule, ...body.map((r) => line(r, sizes))].join("\n")
}
