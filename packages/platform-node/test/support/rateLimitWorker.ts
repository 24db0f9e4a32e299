/**
 * Processes taking tokens from a rate limit, for `SqliteRateLimiter`'s tests and `pnpm bench
 * shared-limiter` (which imports this file): `runWorker` starts `../fixtures/rateLimitWorker.ts` and
 * returns the time of each of its calls; `maxInWindow` counts the most calls in a sliding window.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const worker = fileURLToPath(new URL("../fixtures/rateLimitWorker.ts", import.meta.url))

export interface WorkerOptions {
  /** `sqlite` shares the bucket with every process using `db`; `memory` has a bucket of its own. */
  readonly mode: "sqlite" | "memory"
  readonly db: string
  readonly calls: number
  readonly perSecond: number
  readonly burst: number
}

/** The time of each call (ms since the epoch) a worker process made; rejects with its stderr when it fails. */
export const runWorker = (options: WorkerOptions): Promise<ReadonlyArray<number>> =>
  new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [worker, options.mode, options.db, String(options.calls), String(options.perSecond), String(options.burst)],
      (error, stdout, stderr) =>
        error === null ? resolve(JSON.parse(stdout)) : reject(new Error(`${error.message}\n${stderr}`))
    )
  )

/** The most calls in any window of `windowMs` milliseconds. */
export const maxInWindow = (times: ReadonlyArray<number>, windowMs: number): number => {
  const sorted = [...times].sort((a, b) => a - b)
  let best = 0
  let start = 0
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[end]! - sorted[start]! >= windowMs) start++
    best = Math.max(best, end - start + 1)
  }
  return best
}
