export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const rotate = <T>(items: ReadonlyArray<T>, by: number): ReadonlyArray<T> => {
  const shift = items.length === 0 ? 0 : by % items.length
  return [...items.slice(shift), ...items.slice(0, shift)]
}

export const medianMetrics = (
  samples: ReadonlyArray<Readonly<Record<string, number>>>
): Readonly<Record<string, number>> => {
  const keys = new Set(samples.flatMap((sample) => Object.keys(sample)))
  const out: Record<string, number> = {}
  for (const key of keys) {
    const values = samples.flatMap((sample) => (key in sample ? [sample[key]!] : []))
    out[key] = median(values)
  }
  return out
}
