/**
 * Processes taking tokens from a rate limit, for `SqliteRateLimiter`'s tests and `pnpm bench
 * shared-limiter` (which imports this file): `runWorker` starts `../fixtures/rateLimitWorker.ts` and
 * returns when each of its calls asked for a token and when it got it; `maxInWindow` counts the most
 * calls in a sliding window, `mostSurelyInWindow` the most calls a window surely held.
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
  /** A folder the workers mark: each takes its first token once `parties` of them have. */
  readonly barrier?: { readonly dir: string; readonly parties: number }
}

/** One call of a worker: when it asked for a token and when `take` returned (ms since the epoch). */
export interface Call {
  readonly asked: number
  readonly granted: number
}

/** The calls a worker process made; rejects with its stderr when it fails. */
export const runWorker = (options: WorkerOptions): Promise<ReadonlyArray<Call>> =>
  new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [
        worker,
        options.mode,
        options.db,
        String(options.calls),
        String(options.perSecond),
        String(options.burst),
        ...(options.barrier === undefined ? [] : [options.barrier.dir, String(options.barrier.parties)])
      ],
      (error, stdout, stderr) =>
        error === null
          ? resolve((JSON.parse(stdout) as Array<[number, number]>).map(([asked, granted]) => ({ asked, granted })))
          : reject(new Error(`${error.message}\n${stderr}`))
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

/**
 * The most calls whose token a window of `windowMs` surely handed out. A limiter that reserves
 * (`take`: go into debt, then sleep until the token is due) hands a call its token at a due time
 * somewhere between its `asked` and `granted`; the process may resume from the sleep late (a
 * loaded machine), so `granted` times of calls due at different times can bunch. A call counts for
 * the window starting at a call's `asked` only when its whole span lies inside.
 */
export const mostSurelyInWindow = (calls: ReadonlyArray<Call>, windowMs: number): number => {
  let best = 0
  for (const from of calls) {
    let inside = 0
    for (const call of calls) {
      if (call.asked >= from.asked && call.granted < from.asked + windowMs) inside++
    }
    best = Math.max(best, inside)
  }
  return best
}
