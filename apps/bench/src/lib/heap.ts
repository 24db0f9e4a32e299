const collect = (): void => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc) gc()
}

export const hasGc = (): boolean => typeof (globalThis as { gc?: unknown }).gc === "function"

export const settle = (): void => {
  collect()
  collect()
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
