import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { AgentRecord, RunRecord } from "@corral/platform-node/RunRecord"
import { assert, describe, expect, it } from "@effect/vitest"
import * as Report from "../src/Report.ts"

const here = dirname(fileURLToPath(import.meta.url))
const run: RunRecord = JSON.parse(readFileSync(join(here, "fixtures", "report", "run.json"), "utf8"))

const agent = (id: string): AgentRecord => run.agents.find((a) => a.agentId === id)!

const bars = (html: string): ReadonlyArray<{ readonly classes: string; readonly agent: string }> =>
  [...html.matchAll(/<div class="(bar\b[^"]*)" data-agent="([^"]*)"/g)].map((m) => ({ classes: m[1]!, agent: m[2]! }))

const withAgents = (agents: ReadonlyArray<AgentRecord>, patch: Partial<RunRecord> = {}): RunRecord => ({
  ...run,
  ...patch,
  agents
})

type Event = Record<string, unknown>

const isNonNegative = (value: unknown): boolean => typeof value === "number" && Number.isFinite(value) && value >= 0

const required: Record<string, ReadonlyArray<string>> = {
  X: ["name", "cat", "pid", "tid", "ts", "dur"],
  i: ["name", "pid", "tid", "ts", "s"],
  M: ["name", "pid", "args"]
}

const fieldViolations = (event: Event, index: number): ReadonlyArray<string> => {
  const fields = required[String(event.ph)]
  if (fields === undefined) return [`#${index}: unknown ph ${String(event.ph)}`]
  const missing = fields.filter((f) => event[f] === undefined).map((f) => `#${index} (${event.ph}): missing ${f}`)
  const numbers = ["ts", "dur", "pid", "tid"]
    .filter((f) => event[f] !== undefined && !isNonNegative(event[f]))
    .map((f) => `#${index}: ${f} is not a number >= 0`)
  const scope = event.ph === "i" && !["g", "p", "t"].includes(String(event.s)) ? [`#${index}: bad scope`] : []
  const name =
    event.ph === "M" &&
    typeof (event.args as Event | undefined)?.name !== "string" &&
    event.name !== "thread_sort_index"
  return [...missing, ...numbers, ...scope, ...(name ? [`#${index}: metadata without args.name`] : [])]
}

const threadKey = (event: Event): string => `${event.pid}/${event.tid}`

const namingViolations = (events: ReadonlyArray<Event>): ReadonlyArray<string> => {
  const named = new Set(events.filter((e) => e.ph === "M" && e.name === "thread_name").map(threadKey))
  return events
    .filter((e) => (e.ph === "X" || e.ph === "i") && !named.has(threadKey(e)))
    .map((e) => `${e.ph} ${String(e.name)} on thread ${threadKey(e)} has no thread_name`)
}

const nestingViolations = (events: ReadonlyArray<Event>): ReadonlyArray<string> => {
  const slices = events.filter((e): e is Event & { ts: number; dur: number } => e.ph === "X")
  return slices.flatMap((a, i) =>
    slices
      .slice(i + 1)
      .filter((b) => threadKey(a) === threadKey(b))
      .filter((b) => a.ts < b.ts + b.dur && b.ts < a.ts + a.dur)
      .filter((b) => !(a.ts <= b.ts && b.ts + b.dur <= a.ts + a.dur) && !(b.ts <= a.ts && a.ts + a.dur <= b.ts + b.dur))
      .map((b) => `${String(a.name)} and ${String(b.name)} overlap without nesting on ${threadKey(a)}`)
  )
}

const validateTrace = (file: unknown): Array<string> => {
  const { traceEvents, displayTimeUnit } = file as { traceEvents?: unknown; displayTimeUnit?: unknown }
  if (!Array.isArray(traceEvents)) return ["traceEvents is not an array"]
  const unit = displayTimeUnit === "ms" || displayTimeUnit === "ns" ? [] : ["displayTimeUnit must be ms or ns"]
  const events = traceEvents as ReadonlyArray<Event>
  return [...unit, ...events.flatMap(fieldViolations), ...namingViolations(events), ...nestingViolations(events)]
}

describe("Report.html", () => {
  const html = Report.html(run)

  it("renders one .bar per agent with a stable data-agent", () => {
    const found = bars(html)
    assert.strictEqual(run.agents.length, 8)
    assert.strictEqual(found.length, run.agents.length)
    assert.sameMembers(
      found.map((b) => b.agent),
      run.agents.map((a) => a.agentId)
    )
  })

  it("outlines exactly the agents on the critical path", () => {
    const critical = bars(html).filter((b) => b.classes.split(" ").includes("critical"))
    assert.sameMembers(
      critical.map((b) => b.agent),
      [...run.criticalPath]
    )
  })

  it("shades waits, running and merging time and marks every failed attempt", () => {
    for (const kind of ["waiting-deps", "waiting-claims", "waiting-rate-limit", "queued", "running", "merging"]) {
      expect(html).toContain(`class="seg seg-${kind}"`)
    }
    const failures = run.agents.reduce((n, a) => n + a.failures.length, 0)
    assert.strictEqual(html.match(/class="fail"/g)?.length, failures)
    expect(html).toMatch(/class="bar outcome-Failed" data-agent="lexer"/)
    expect(html).toMatch(/class="bar outcome-TimedOut critical" data-agent="e2e-tests"/)
  })

  it("escapes user text and contains no scripts or external assets", () => {
    assert.include(agent("lexer").detail, "<script>")
    expect(html).not.toMatch(/<script/i)
    expect(html).toContain("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt; &amp; gave up")
    expect(html).toContain("&lt;b&gt;unterminated&lt;/b&gt;")
    expect(html).not.toMatch(/\b(src|href)=|<link|https?:\/\//i)
  })

  it("escapes agent ids inside attributes", () => {
    const odd = { ...agent("schema"), agentId: `a"b<c>&'d` }
    const found = bars(Report.html(withAgents([odd], { criticalPath: [odd.agentId] })))
    assert.deepStrictEqual(found, [
      { classes: "bar outcome-Succeeded critical", agent: "a&quot;b&lt;c&gt;&amp;&#39;d" }
    ])
  })

  it("contains the header, the legend and the outcome table", () => {
    for (const text of [
      "r-20260101-1000",
      "plans/release.yaml",
      "failed",
      "2m39s",
      "$5.43",
      "4 Succeeded",
      "1 TimedOut"
    ]) {
      expect(html).toContain(text)
    }
    expect(html).toContain(`<div class="legend">`)
    for (const label of [
      "waiting for dependencies",
      "waiting for claims",
      "waiting for a rate limit",
      "failed attempt"
    ]) {
      expect(html).toContain(label)
    }
    expect(html).toContain("critical path (schema → api → e2e-tests)")
    const headings = [...html.matchAll(/<th[^>]*>([^<]+)<\/th>/g)].map((m) => m[1])
    assert.deepStrictEqual(headings, ["agent", "outcome", "attempts", "duration", "waited", "cost", "merge", "detail"])
    assert.strictEqual(html.match(/<tr data-agent=/g)?.length, run.agents.length)
  })

  it("renders an unfinished run and agents that never started", () => {
    const pending: AgentRecord = { ...agent("docs"), agentId: "pending", outcome: null, startedAt: null, endedAt: null }
    const html = Report.html(withAgents([agent("api"), pending], { endedAt: null, status: "running" }))
    assert.strictEqual(bars(html).length, 2)
    expect(html).toContain("(so far)")
    expect(html).toContain(`class="bar outcome-Running" data-agent="pending"`)
  })
})

describe("Report.trace", () => {
  const file = Report.trace(run)
  const events = file.traceEvents

  it("is valid trace-event JSON", () => {
    assert.deepStrictEqual(validateTrace(JSON.parse(JSON.stringify(file))), [])
    assert.strictEqual(file.displayTimeUnit, "ms")
  })

  it("the validator rejects broken events", () => {
    const broken = {
      displayTimeUnit: "ms",
      traceEvents: [
        { ph: "X", name: "a", cat: "running", pid: 1, tid: 9, ts: -1 },
        { ph: "i", name: "b", pid: 1, tid: 9, ts: 1, s: "x" },
        { ph: "M", name: "thread_name", pid: 1, tid: 2, args: { name: "t" } },
        { ph: "X", name: "c", cat: "running", pid: 1, tid: 2, ts: 0, dur: 10 },
        { ph: "X", name: "d", cat: "merging", pid: 1, tid: 2, ts: 5, dur: 10 },
        { ph: "B", name: "e", pid: 1, tid: 2, ts: 0 }
      ]
    }
    assert.sameMembers(validateTrace(broken), [
      "#0 (X): missing dur",
      "#0: ts is not a number >= 0",
      "#1: bad scope",
      "X a on thread 1/9 has no thread_name",
      "i b on thread 1/9 has no thread_name",
      "#5: unknown ph B",
      "c and d overlap without nesting on 1/2"
    ])
  })

  it("names one thread per agent and emits one slice per span plus one per agent", () => {
    const threads = events.filter((e) => e.ph === "M" && e.name === "thread_name").map((e) => e.args.name)
    assert.sameMembers(
      threads,
      run.agents.map((a) => a.agentId)
    )
    const spans = run.agents.reduce((n, a) => n + a.spans.length, 0)
    assert.strictEqual(events.filter((e) => e.ph === "X").length, spans + run.agents.length)
  })

  it("uses microseconds since the run start, the span kind as category and the agent outcome in args", () => {
    const running = events.find((e) => e.ph === "X" && e.cat === "running" && e.args.agent === "schema")
    expect(running).toMatchObject({ name: "running", ts: 200_000, dur: 37_800_000 })
    expect(running?.args).toMatchObject({ outcome: "Succeeded", note: "attempt 1" })
    const slice = events.find((e) => e.ph === "X" && e.name === "e2e-tests")
    expect(slice).toMatchObject({ cat: "agent,critical-path", ts: 0, dur: 158_000_000 })
  })

  it("marks each failed attempt with an instant event", () => {
    const instants = events.filter((e) => e.ph === "i")
    assert.strictEqual(instants.length, 4)
    expect(instants.find((e) => e.args.attempt === 2 && e.args.agent === "lexer")).toMatchObject({
      s: "t",
      ts: 30_000_000,
      cat: "failure"
    })
  })
})
