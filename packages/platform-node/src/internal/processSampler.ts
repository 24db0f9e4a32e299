/**
 * One timer for the watchdogs of all running process agents: each watched process is an entry that
 * the timer calls at the shared sampling instants (multiples of 100 ms of the monotonic clock, or of
 * 500 ms when every entry samples that slowly), so that one /proc scan serves them all and a process
 * costs no fiber and no timer of its own (a short one ends before its first sample).
 *
 * An entry's first sample is at least 50 ms after it was added; it samples every 100 ms for its first
 * 2 seconds, or for as long as it runs when `fast` (a memory limit), then every 500 ms. The callback
 * is told the sample's number (1 for the first); a callback that throws is removed.
 *
 * @internal
 */

export const SAMPLE_MS = 100
/** After its first `FAST_WATCH_MS`, an entry that is not `fast` is sampled every `SLOW_SAMPLE_MS`. */
export const FAST_WATCH_MS = 2000
export const SLOW_SAMPLE_MS = 500

export interface Entry {
  readonly addedAt: number
  readonly fast: boolean
  samples: number
  readonly onSample: (sample: number, period: number) => void
}

const entries = new Set<Entry>()
let timer: ReturnType<typeof setTimeout> | undefined
/** The instant (`performance.now()` ms) the timer is set for. */
let timerAt = 0

const isFast = (entry: Entry, now: number): boolean => entry.fast || now - entry.addedAt < FAST_WATCH_MS

/** The next multiple of `period` ms after `now`. */
const nextInstant = (now: number, period: number): number => now - (now % period) + period

const schedule = (now: number): void => {
  if (entries.size === 0) return
  let period = SLOW_SAMPLE_MS
  for (const entry of entries) {
    if (!isFast(entry, now)) continue
    period = SAMPLE_MS
    break
  }
  const at = nextInstant(now, period)
  if (timer !== undefined) {
    if (timerAt <= at) return
    clearTimeout(timer)
  }
  timerAt = at
  timer = setTimeout(tick, at - now)
  // The processes and pipes of the running agents keep this process alive, not their watchdog.
  timer.unref()
}

const tick = (): void => {
  timer = undefined
  const now = performance.now()
  const onSlowInstant = Math.round(now / SAMPLE_MS) % (SLOW_SAMPLE_MS / SAMPLE_MS) === 0
  for (const entry of entries) {
    if (now - entry.addedAt < SAMPLE_MS / 2) continue
    const fast = isFast(entry, now)
    if (!fast && !onSlowInstant) continue
    entry.samples += 1
    try {
      entry.onSample(entry.samples, fast ? SAMPLE_MS : SLOW_SAMPLE_MS)
    } catch {
      entries.delete(entry)
    }
  }
  schedule(performance.now())
}

/** Samples `onSample` at the shared instants until `remove` is called. */
export const add = (fast: boolean, onSample: Entry["onSample"]): Entry => {
  const now = performance.now()
  const entry: Entry = { addedAt: now, fast, samples: 0, onSample }
  entries.add(entry)
  schedule(now)
  return entry
}

export const remove = (entry: Entry): void => {
  entries.delete(entry)
  if (entries.size > 0 || timer === undefined) return
  clearTimeout(timer)
  timer = undefined
}
