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
 * The event-loop turn of `settle`, then two young-generation collections, so the next timed run
 * starts with an empty young generation while the old generation (and the hidden classes there,
 * which optimised code depends on) is left alone. One is not enough: a young object that a dead
 * object in the old generation refers to (an earlier run's result, held by its fiber, which the
 * run's own scavenges promoted) survives every young collection; the first copies it, the second
 * promotes it, where it waits, as other old garbage does, for a mark-compact.
 */
export const settleYoung = async (): Promise<void> => {
  await new Promise<void>((resolve) => setImmediate(resolve))
  const gc = (globalThis as { gc?: (options?: { type: "minor" | "major"; execution?: "sync" }) => void }).gc
  if (gc) {
    gc({ type: "minor", execution: "sync" })
    gc({ type: "minor", execution: "sync" })
  }
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
