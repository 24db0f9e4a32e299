import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { maxInWindow, runWorker } from "../../../../packages/platform-node/test/support/rateLimitWorker.ts"
import { metricAtMost, ratioAtMost } from "../lib/targets.ts"
import type { Approach, Sample, Scenario } from "../types.ts"

interface Params {
  readonly processes: number
  readonly callsEach: number
  readonly perSecond: number
  readonly burst: number
}

/** The span from the first call to the last across all processes (process start-up excluded). */
const sampleOf = (stamps: ReadonlyArray<number>): Sample => ({
  ms: Math.max(...stamps) - Math.min(...stamps),
  metrics: { maxPerSecond: maxInWindow(stamps, 1000), calls: stamps.length }
})

const processes = (mode: "sqlite" | "memory", name: string): Approach<Params> => ({
  name,
  run: async (p) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-bench-limits-"))
    try {
      const options = {
        mode,
        db: path.join(dir, "locks.db"),
        calls: p.callsEach,
        perSecond: p.perSecond,
        burst: p.burst
      }
      const all = await Promise.all(Array.from({ length: p.processes }, () => runWorker(options)))
      return sampleOf(all.flat().map((call) => call.granted))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

const oneProcess: Approach<Params> = {
  name: "in-memory RateLimiter, 1 process making all calls (reference)",
  run: async (p) => {
    const calls = p.processes * p.callsEach
    const made = await runWorker({ mode: "memory", db: "", calls, perSecond: p.perSecond, burst: p.burst })
    return sampleOf(made.map((call) => call.granted))
  }
}

const sharedName = "SqliteRateLimiter shared by 2 processes"

export const sharedLimiter: Scenario<Params> = {
  name: "shared-limiter",
  description:
    "2 processes × 100 calls through one 50/s burst-10 limit. Shared through SQLite (SqliteRateLimiter, as " +
    "`corral run` does), the processes together keep the limit; with a limiter each, they get it twice.",
  floor:
    "ideal = (200 calls - 10 burst) / 50 per s = 3.8 s from the first call to the last; ratio = span / 3.8 s " +
    "(below 1.00× means the limit was exceeded); max/1 s = most calls in any sliding second (60 allowed)",
  targets: [
    metricAtMost(`${sharedName}: max/1 s ≤ 60`, /processes/, sharedName, "maxPerSecond", 60, (v) => v.toFixed(0)),
    ratioAtMost(`${sharedName}: span ≤ 1.01× the ideal`, /processes/, sharedName, 1.01)
  ],
  reps: 3,
  columns: [{ key: "maxPerSecond", label: "max/1 s", format: (v) => v.toFixed(0) }],
  approaches: [
    processes("sqlite", sharedName),
    oneProcess,
    processes("memory", "in-memory RateLimiter per process, 2 processes (not shared)")
  ],
  cases: () => [
    {
      label: "2 processes × 100 calls, 50/s, burst 10",
      params: { processes: 2, callsEach: 100, perSecond: 50, burst: 10 },
      boundMs: 3800
    }
  ]
}
