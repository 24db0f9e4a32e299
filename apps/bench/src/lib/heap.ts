const collect = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc) gc()
}

export const hasGc = (): boolean => typeof (globalThis as { gc?: unknown }).gc === "function"

/**
 * Lets work that earlier runs left queued on the event loop run (a task queued with `setImmediate`
 * keeps whatever it refers to alive until it runs), then forces two full collections. Without the
 * turn, memory that an earlier run still held was counted in the next profiled run's baseline and
 * freed during the run, which read as 0 B per task.
 */
export const settle = async (): Promise<void> => {
  await new Promise<void>((resolve) => setImmediate(resolve))
  collect()
  collect()
}

/**
 * The event-loop turn of `settle`, then one young-generation collection: garbage an earlier run
 * left in the young generation is not collected inside the next timed run, while the old
 * generation (and the hidden classes there, which optimised code depends on) is left alone.
 */
export const settleYoung = async (): Promise<void> => {
  await new Promise<void>((resolve) => setImmediate(resolve))
  const gc = (globalThis as { gc?: (options?: { type: "minor" | "major"; execution?: "sync" }) => void }).gc
  if (gc) gc({ type: "minor", execution: "sync" })
}

const liveHeap = (): number => {
  collect()
  return process.memoryUsage().heapUsed
}

const holder: { value: unknown } = { value: undefined }

export interface HeapProbe {
  readonly probe: (index: number) => void
  readonly finish: (retain: unknown) => { readonly peakBytes: number; readonly bytesPerItem: number }
}

export const heapProbe = (items: number, samples = 10): HeapProbe => {
  const stride = Math.max(1, Math.ceil(items / samples))
  const baseline = liveHeap()
  let peak = baseline
  const sample = () => {
    peak = Math.max(peak, liveHeap())
  }
  return {
    probe: (index) => {
      if (index % stride === stride - 1) sample()
    },
    finish: (retain) => {
      holder.value = retain
      sample()
      holder.value = undefined
      const peakBytes = Math.max(0, peak - baseline)
      return { peakBytes, bytesPerItem: peakBytes / items }
    }
  }
}
