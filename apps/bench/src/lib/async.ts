export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

export const runPool = async <T>(
  items: ReadonlyArray<T>,
  concurrency: number,
  task: (item: T) => unknown
): Promise<void> => {
  let next = 0
  const worker = async () => {
    while (next < items.length) await task(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker))
}

export class Mutex {
  #locked = false
  readonly #waiters: Array<() => void> = []

  acquire(): Promise<void> {
    if (!this.#locked) {
      this.#locked = true
      return Promise.resolve()
    }
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  release(): void {
    const next = this.#waiters.shift()
    if (next) next()
    else this.#locked = false
  }
}

export const mutexes = <K>(): ((key: K) => Mutex) => {
  const table = new Map<K, Mutex>()
  return (key) => {
    let mutex = table.get(key)
    if (!mutex) table.set(key, (mutex = new Mutex()))
    return mutex
  }
}

export const mulberry32 = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const randomInt = (random: () => number, min: number, max: number): number =>
  min + Math.floor(random() * (max - min + 1))

/** Runs `body` and reports its wall time as a sample. */
export const timed = async (body: () => Promise<unknown>): Promise<{ readonly ms: number }> => {
  const start = performance.now()
  await body()
  return { ms: performance.now() - start }
}
