/**
 * mulberry32: a small seeded random source for tests (the sweeps' stop instants, the ledger's crash
 * points), so a seed gives the same numbers on every machine. The benchmarks keep their own copy in
 * `apps/bench/src/lib/async.ts` (the bench does not import the test tree).
 */
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
