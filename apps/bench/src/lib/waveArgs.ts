/**
 * The command line the io-scaling probes share (`phaseprobe.ts`, `waveprobe.ts`):
 * `[mode] [count] [n] [sleepMs] [concurrency]`, default io-scaling's 1,000 × 10 ms @100, and the
 * `@corral/core` they measure (`CORRAL_CORE` names another copy of `packages/core/src/index.ts`,
 * for A/B comparisons in alternating processes).
 */
export const waveArgs = async (defaultCount: number) => {
  const [mode = "corral", count = String(defaultCount), n = "1000", sleepMs = "10", concurrency = "100"] =
    process.argv.slice(2)
  const core: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")
  return {
    mode,
    count: Number(count),
    n: Number(n),
    sleepMs: Number(sleepMs),
    concurrency: Number(concurrency),
    ...core
  }
}
