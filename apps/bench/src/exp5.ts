import { Effect } from "effect"
const chain = async (n: number) => { const t = performance.now(); for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 2)); return performance.now() - t }
console.log("96 sequential setTimeout(2):", (await chain(96)).toFixed(0), "ms")
const t = performance.now(); await Effect.runPromise(Effect.forEach(Array.from({ length: 96 }), () => Effect.sleep(2), { discard: true })); console.log("96 sequential Effect.sleep(2):", (performance.now() - t).toFixed(0), "ms")
// with background load of 31 other concurrent sleepers chains
const t2 = performance.now(); await Promise.all(Array.from({ length: 32 }, () => chain(60))); console.log("32 parallel chains of 60:", (performance.now() - t2).toFixed(0), "ms (ideal 120)")
