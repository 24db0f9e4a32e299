import type { OutputLine } from "../ProcessRunner.ts"

export type StreamName = "stdout" | "stderr"

export const TAIL_LINES = 50
const TAIL_LINE_CHARS = 1000
const MAX_LINE_CHARS = 64 * 1024
const ON_LINE_PER_SECOND = 20

export interface CollectorOptions {
  readonly redact: (text: string) => string
  readonly onLine: ((line: OutputLine) => void) | undefined
  readonly maxOutputBytes: number | undefined
  readonly logging: boolean
  readonly now: () => number
}

const mark: Record<StreamName, string> = { stdout: "[out] ", stderr: "[err] " }

const clip = (line: string): string => (line.length > TAIL_LINE_CHARS ? `${line.slice(0, TAIL_LINE_CHARS)}…` : line)

export class LineCollector {
  readonly tail: Array<string> = []
  lastStderr: string | undefined
  lastStdout: string | undefined
  bytes = 0
  dropped = 0
  overLimit = false
  /** Created on the first chunk of each stream: most short commands write nothing to one of them. */
  private readonly decoders: Record<StreamName, TextDecoder | undefined> = { stdout: undefined, stderr: undefined }
  private readonly partial = { stdout: "", stderr: "" }
  private tokens = ON_LINE_PER_SECOND
  private refilledAt: number
  private readonly options: CollectorOptions

  constructor(options: CollectorOptions) {
    this.options = options
    this.refilledAt = options.now()
  }

  push(stream: StreamName, chunk: Uint8Array): string {
    if (this.overLimit) return ""
    const budget = this.options.maxOutputBytes
    let bytes = chunk
    if (budget !== undefined && this.bytes + chunk.byteLength > budget) {
      bytes = chunk.subarray(0, Math.max(0, budget - this.bytes))
      this.overLimit = true
    }
    this.bytes += bytes.byteLength
    const decoder = (this.decoders[stream] ??= new TextDecoder())
    const text = this.partial[stream] + decoder.decode(bytes, { stream: true })
    const lines = text.split("\n")
    const rest = lines.pop() ?? ""
    if (rest.length > MAX_LINE_CHARS) lines.push(rest)
    this.partial[stream] = rest.length > MAX_LINE_CHARS ? "" : rest
    return this.emit(stream, lines)
  }

  flush(stream: StreamName): string {
    const rest = this.partial[stream] + (this.decoders[stream]?.decode() ?? "")
    this.partial[stream] = ""
    return rest === "" ? "" : this.emit(stream, [rest])
  }

  lastLine(): string | undefined {
    return this.lastStderr ?? this.lastStdout
  }

  private emit(stream: StreamName, raw: ReadonlyArray<string>): string {
    let log = ""
    for (const line of raw) {
      const text = this.options.redact(line.endsWith("\r") ? line.slice(0, -1) : line)
      if (this.options.logging) log += `${mark[stream]}${text}\n`
      this.remember(stream, text)
      this.forward(stream, text)
    }
    return log
  }

  private remember(stream: StreamName, text: string) {
    const clipped = clip(text)
    this.tail.push(clipped)
    if (this.tail.length > TAIL_LINES) this.tail.shift()
    if (text.trim() === "") return
    if (stream === "stderr") this.lastStderr = clipped
    else this.lastStdout = clipped
  }

  private forward(stream: StreamName, text: string) {
    const onLine = this.options.onLine
    if (onLine === undefined) return
    const now = this.options.now()
    this.tokens = Math.min(ON_LINE_PER_SECOND, this.tokens + ((now - this.refilledAt) * ON_LINE_PER_SECOND) / 1000)
    this.refilledAt = now
    if (this.tokens < 1) {
      this.dropped += 1
      return
    }
    this.tokens -= 1
    try {
      onLine({ stream, text })
    } catch {
      return
    }
  }
}
