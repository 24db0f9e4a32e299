import { describe, expect, it } from "vitest"
import { ON_LINE_MAX_CHARS, LineCollector, redactCutTail, safeCut } from "../../src/internal/processOutput.ts"
import { redactWith } from "../../src/internal/processPlan.ts"

const SECRET = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZYXWVUTSRQPON"
const OTHER = "tok-1234567890"
const encoder = new TextEncoder()

/** Every 6-character piece of a secret: none may appear anywhere in what the collector produced. */
const fragments = (secret: string) => Array.from({ length: secret.length - 5 }, (_, i) => secret.slice(i, i + 6))

const collect = (text: string, chunkSize: number, maxOutputBytes?: number) => {
  const lines: Array<string> = []
  let now = 0
  const secrets = [SECRET, OTHER]
  const collector = new LineCollector({
    redact: redactWith(secrets),
    secrets,
    onLine: (line) => lines.push(line.text),
    maxOutputBytes,
    logging: true,
    now: () => (now += 10_000)
  })
  const bytes = encoder.encode(text)
  let log = ""
  for (let at = 0; at < bytes.length; at += chunkSize)
    log += collector.push("stdout", bytes.subarray(at, at + chunkSize))
  log += collector.flush("stdout")
  return { log, lines, tail: collector.tail.join("\n") }
}

const expectNoFragments = (output: string, what: string) => {
  for (const fragment of [...fragments(SECRET), ...fragments(OTHER)]) {
    expect(output.includes(fragment), `${what} holds ${fragment}`).toBe(false)
  }
}

describe("LineCollector redaction across read chunks", () => {
  const cut = 64 * 1024
  it("sees a secret whole at every offset around the cut of a line longer than 64 KiB", () => {
    for (const chunkSize of [65_536, 4096, 1000, 61]) {
      for (let offset = cut - SECRET.length - 3; offset <= cut + 3; offset++) {
        const line = `${"x".repeat(offset)}${SECRET}${"y".repeat(70_000)}${OTHER}${"z".repeat(cut)}\n`
        const { log, lines, tail } = collect(line, chunkSize)
        const what = `offset ${offset}, chunks of ${chunkSize}`
        expectNoFragments(log, `log (${what})`)
        expectNoFragments(lines.join("\n"), `events (${what})`)
        expectNoFragments(tail, `tail (${what})`)
        expect(log.split("***").length - 1, what).toBe(2)
        expect(log.replace(/\[out\] |\n/g, "").length, what).toBe(line.length - 1 - SECRET.length - OTHER.length + 6)
      }
    }
  })

  it("sees secrets whole around every later cut too (lines of several times 64 KiB)", () => {
    for (const k of [2, 3]) {
      for (let offset = k * cut - SECRET.length - 2; offset <= k * cut + 2; offset += 3) {
        const line = `${"a".repeat(offset)}${SECRET}${"b".repeat(100)}\n`
        const { log } = collect(line, 8192)
        expectNoFragments(log, `log (cut ${k}, offset ${offset})`)
        expect(log).toContain("***")
      }
    }
  })

  it("redacts a secret cut off by maxOutputBytes", () => {
    for (let keep = 1; keep < SECRET.length; keep++) {
      const { log, tail } = collect(`start\n${"q".repeat(10)}${SECRET}\n`, 7, 6 + 10 + keep)
      expectNoFragments(log, `log (${keep} characters kept)`)
      expectNoFragments(tail, `tail (${keep} characters kept)`)
    }
  })

  it("safeCut and redactCutTail", () => {
    expect(safeCut("aaSECRETbb", 5, ["SECRET"])).toBe(2)
    expect(safeCut("aaSECRETbb", 2, ["SECRET"])).toBe(2)
    expect(safeCut("aaSECRETbb", 8, ["SECRET"])).toBe(8)
    expect(redactCutTail("hello SEC", ["SECRET"])).toBe("hello ***")
    expect(redactCutTail("hello", ["SECRET"])).toBe("hello")
  })
})

describe("LineCollector events", () => {
  it("throttles events by characters as well as lines and clips long lines", () => {
    const sent: Array<string> = []
    let now = 0
    const collector = new LineCollector({
      redact: (text) => text,
      secrets: [],
      onLine: (line) => sent.push(line.text),
      maxOutputBytes: undefined,
      logging: false,
      now: () => now
    })
    const line = `${"x".repeat(60_000)}\n`
    for (let second = 0; second < 10; second++) {
      for (let i = 0; i < 20; i++) collector.push("stdout", encoder.encode(line))
      now += 1000
    }
    const chars = sent.reduce((sum, text) => sum + text.length, 0)
    expect(sent.every((text) => text.length <= ON_LINE_MAX_CHARS + 1)).toBe(true)
    expect(chars).toBeLessThanOrEqual(11 * 32 * 1024)
    expect(sent.length).toBeLessThan(200)
    expect(collector.dropped).toBe(200 - sent.length)
  })
})
