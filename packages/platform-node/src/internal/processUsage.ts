/**
 * Reading a process agent's `CORRAL_USAGE_FILE`: JSON lines the process appends
 * (`{"inputTokens":…,"outputTokens":…,"costUsd":…}`). The file is read while the process runs (every
 * 300 ms; every 500 ms after its first 2 seconds without a memory limit) and once more after it
 * exits; each complete line is reported as the agent's usage.
 *
 * What the process appends is read in pieces of {@link CHUNK_BYTES}, so corral's memory does not
 * grow with the file: a line longer than {@link MAX_LINE_BYTES} is not kept but counted, and skipped
 * with a warning naming the agent, the file, the line number and the line's size. A line that is not
 * a usage object is skipped with a warning naming the agent, the file and the line number. A file
 * sends at most {@link MAX_WARNINGS} warnings; the last says that later ones are not reported. With
 * `maxBytes` (`limits.maxUsageBytes`), nothing past that many bytes is read, and a file found larger
 * is reported once through `onOverLimit` with its size.
 *
 * @internal
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as Usage from "@corral/core/Usage"
import * as Effect from "effect/Effect"

/** Bytes read from the file at a time. */
export const CHUNK_BYTES = 64 * 1024

/** The longest usage line read (a usage object takes well under 200 bytes). */
export const MAX_LINE_BYTES = 64 * 1024

/** Warnings one usage file sends at most. */
export const MAX_WARNINGS = 20

const fields = ["inputTokens", "outputTokens", "costUsd"] as const

/** The usage in one line, or why it is not one. */
export const parseUsageLine = (line: string): Partial<Usage.Usage> | string => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return `not JSON: ${line.length > 80 ? `${line.slice(0, 80)}…` : line}`
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `expected an object like {"inputTokens":1200,"outputTokens":300,"costUsd":0.004}, got ${line}`
  const usage: { -readonly [K in keyof Usage.Usage]?: number } = {}
  for (const field of fields) {
    const n = (value as Record<string, unknown>)[field]
    if (n === undefined) continue
    if (typeof n !== "number" || !Number.isFinite(n) || n < 0)
      return `${field} must be a non-negative number, got ${JSON.stringify(n)}`
    usage[field] = n
  }
  if (Object.keys(usage).length === 0) return `expected at least one of ${fields.join(", ")}, got ${line}`
  return usage
}

/** What one read found: the usage of its lines and the warnings to send. */
interface Batch {
  total: Usage.Usage
  reports: number
  readonly warnings: Array<string>
}

/** The bound on the file's size and what to do when it is passed. */
export interface UsageLimit {
  readonly maxBytes: number
  readonly onOverLimit: (size: number) => void
}

/** Reads what was appended to the usage file since the last call; complete lines only. */
export class UsageTail {
  private offset = 0
  /** The pieces of the unfinished line; dropped once it is longer than {@link MAX_LINE_BYTES}. */
  private pending: Array<Buffer> = []
  private pendingBytes = 0
  private line = 0
  private warned = 0
  /** Whether the file was found larger than `maxBytes` (reported once). */
  private over = false
  /** Whether the last read found no file. */
  missing = false

  readonly path: string
  readonly agent: string
  readonly onWarning: (message: string) => Effect.Effect<void>
  readonly onUsage: ((usage: Usage.Usage) => void) | undefined
  readonly limit: UsageLimit | undefined

  constructor(
    path: string,
    agent: string,
    onWarning: (message: string) => Effect.Effect<void>,
    onUsage?: (usage: Usage.Usage) => void,
    limit?: UsageLimit
  ) {
    this.path = path
    this.agent = agent
    this.onWarning = onWarning
    this.onUsage = onUsage
    this.limit = limit
  }

  /**
   * Whether the file grew (within `maxBytes`) since the last read, from a `stat` that throws nothing:
   * most processes never write the file, and this needs no asynchronous read (and its error object)
   * of a file that is not there. A file larger than `maxBytes` is reported to `onOverLimit`.
   */
  grew(): boolean {
    const stat = fs.statSync(this.path, { throwIfNoEntry: false })
    this.missing = stat === undefined
    return stat !== undefined && this.readable(stat.size) > this.offset
  }

  /** Reports each new complete line (all of it when `final`, a last line without newline too). */
  read(final: boolean): Effect.Effect<void> {
    return Effect.suspend(() =>
      this.grew() || (final && this.pendingBytes > 0) ? this.readAppended(final) : Effect.void
    )
  }

  /** How far the file may be read: its size, or `maxBytes` when it is larger (reported). */
  private readable(size: number): number {
    const limit = this.limit
    if (limit === undefined || size <= limit.maxBytes) return size
    if (!this.over) limit.onOverLimit(size)
    this.over = true
    return limit.maxBytes
  }

  private readAppended(final: boolean): Effect.Effect<void> {
    const batch: Batch = { total: Usage.zero, reports: 0, warnings: [] }
    return Effect.flatMap(
      Effect.promise(() => this.readNew(batch)),
      () => {
        // A last line cut by `maxBytes` is not one the process finished.
        if (final && this.pendingBytes > 0 && !this.over) this.endLine(batch)
        const reported =
          batch.reports === 0
            ? Effect.void
            : Effect.andThen(
                Usage.report(batch.total),
                Effect.sync(() => this.onUsage?.(batch.total))
              )
        return Effect.andThen(Effect.forEach(batch.warnings, this.onWarning, { discard: true }), reported)
      }
    )
  }

  private async readNew(batch: Batch): Promise<void> {
    let handle: fsp.FileHandle
    try {
      handle = await fsp.open(this.path, "r")
    } catch {
      return
    }
    try {
      const end = this.readable((await handle.stat()).size)
      if (end <= this.offset) return
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, end - this.offset))
      while (this.offset < end) {
        const length = Math.min(buffer.length, end - this.offset)
        const { bytesRead } = await handle.read(buffer, 0, length, this.offset)
        if (bytesRead === 0) return
        this.offset += bytesRead
        this.take(buffer.subarray(0, bytesRead), batch)
      }
    } finally {
      await handle.close()
    }
  }

  /** Handles each line `bytes` completes; keeps what follows the last newline for the next piece. */
  private take(bytes: Buffer, batch: Batch): void {
    let start = 0
    for (let newline = bytes.indexOf(10); newline !== -1; newline = bytes.indexOf(10, start)) {
      if (this.pendingBytes === 0) {
        this.line++
        this.parse(bytes.subarray(start, newline), batch)
      } else {
        this.keep(bytes.subarray(start, newline))
        this.endLine(batch)
      }
      start = newline + 1
    }
    this.keep(bytes.subarray(start))
  }

  /** Adds a piece to the unfinished line (a copy: the read buffer is reused); only counts it past the cap. */
  private keep(piece: Buffer): void {
    if (piece.length === 0) return
    this.pendingBytes += piece.length
    if (this.pendingBytes > MAX_LINE_BYTES) this.pending = []
    else this.pending.push(Buffer.from(piece))
  }

  private endLine(batch: Batch): void {
    this.line++
    const bytes = this.pendingBytes
    const pieces = this.pending
    this.pending = []
    this.pendingBytes = 0
    if (bytes > MAX_LINE_BYTES) this.warn(batch, `${bytes} bytes, longer than ${MAX_LINE_BYTES} bytes; skipped`)
    else this.parse(Buffer.concat(pieces, bytes), batch)
  }

  private parse(bytes: Buffer, batch: Batch): void {
    const line = bytes.toString("utf8").trim()
    if (line === "") return
    const parsed = parseUsageLine(line)
    if (typeof parsed === "string") this.warn(batch, parsed)
    else {
      batch.total = Usage.add(batch.total, parsed)
      batch.reports++
    }
  }

  private warn(batch: Batch, reason: string): void {
    this.warned++
    if (this.warned > MAX_WARNINGS) return
    const more = this.warned === MAX_WARNINGS ? ` (later problems of this file are not reported)` : ""
    batch.warnings.push(`agent ${JSON.stringify(this.agent)}: ${this.path} line ${this.line}: ${reason}${more}`)
  }
}
