import type { OutputLine } from "../ProcessRunner.ts"

export type StreamName = "stdout" | "stderr"

export const TAIL_LINES = 50
const TAIL_LINE_CHARS = 1000
const MAX_LINE_CHARS = 64 * 1024
const ON_LINE_PER_SECOND = 20
/** `onLine` gets at most this many characters of a line (the log has all of it). */
export const ON_LINE_MAX_CHARS = 4096
/** `onLine` gets at most this many characters per second, on top of the line rate. */
export const ON_LINE_CHARS_PER_SECOND = 32 * 1024

export interface CollectorOptions {
  readonly redact: (text: string) => string
  /** The secret values `redact` replaces; a line cut into pieces is never cut inside one. */
  readonly secrets: ReadonlyArray<string>
  readonly onLine: ((line: OutputLine) => void) | undefined
  readonly maxOutputBytes: number | undefined
  readonly logging: boolean
  readonly now: () => number
}

const mark: Record<StreamName, string> = { stdout: "[out] ", stderr: "[err] " }

const clip = (line: string, chars = TAIL_LINE_CHARS): string =>
  line.length > chars ? `${line.slice(0, chars)}…` : line

/** Moves `cut` left until no occurrence of a secret in `text` spans it. */
export const safeCut = (text: string, cut: number, secrets: ReadonlyArray<string>): number => {
  let at = cut
  let moved = true
  while (moved) {
    moved = false
    for (const secret of secrets) {
      for (let start = Math.max(0, at - secret.length + 1); start < at; start++) {
        if (text.startsWith(secret, start)) {
          at = start
          moved = true
          break
        }
      }
    }
  }
  return at
}

/** Replaces a trailing prefix of a secret (output cut off inside a secret) with `***`. */
export const redactCutTail = (text: string, secrets: ReadonlyArray<string>): string => {
  let longest = 0
  for (const secret of secrets) {
    for (let k = Math.min(secret.length - 1, text.length); k > longest; k--) {
      if (text.endsWith(secret.slice(0, k))) {
        longest = k
        break
      }
    }
  }
  return longest === 0 ? text : `${text.slice(0, text.length - longest)}***`
}

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
  private charTokens = ON_LINE_CHARS_PER_SECOND
  private refilledAt: number
  private readonly options: CollectorOptions
  /** Characters kept back when a long line is cut: a secret starting in them may not have arrived whole. */
  private readonly overlap: number

  constructor(options: CollectorOptions) {
    this.options = options
    this.refilledAt = options.now()
    this.overlap = Math.max(0, ...options.secrets.map((secret) => secret.length - 1))
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
    let rest = lines.pop() ?? ""
    if (rest.length > MAX_LINE_CHARS) {
      const cut = safeCut(rest, rest.length - this.overlap, this.options.secrets)
      if (cut > 0) {
        lines.push(rest.slice(0, cut))
        rest = rest.slice(cut)
      }
    }
    this.partial[stream] = rest
    return this.emit(stream, lines)
  }

  flush(stream: StreamName): string {
    let rest = this.partial[stream] + (this.decoders[stream]?.decode() ?? "")
    this.partial[stream] = ""
    if (this.overLimit) rest = redactCutTail(rest, this.options.secrets)
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
    const elapsed = now - this.refilledAt
    this.tokens = Math.min(ON_LINE_PER_SECOND, this.tokens + (elapsed * ON_LINE_PER_SECOND) / 1000)
    this.charTokens = Math.min(ON_LINE_CHARS_PER_SECOND, this.charTokens + (elapsed * ON_LINE_CHARS_PER_SECOND) / 1000)
    this.refilledAt = now
    const sent = clip(text, ON_LINE_MAX_CHARS)
    if (this.tokens < 1 || this.charTokens < sent.length) {
      this.dropped += 1
      return
    }
    this.tokens -= 1
    this.charTokens -= sent.length
    try {
      onLine({ stream, text: sent })
    } catch {
      return
    }
  }
}
