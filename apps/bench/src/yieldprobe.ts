/**
 * CPU and instruction counts per agent for A/B comparisons of corral's scheduler:
 * `node --expose-gc src/yieldprobe.ts [mode] [n] [runs] [sleepMs] [concurrency] [root]` runs `runs`
 * runs of `n` agents (default 20,000 × 5 @64) whose effect is `Effect.promise` of a resolved promise,
 * or `Effect.sleep(sleepMs)` when `sleepMs` > 0, each after a young GC, and prints CPU µs per agent
 * (`process.cpuUsage()`) of every run and the median of the second half. `mode`: `corral`
 * (`Agent.make` included), `forEach` (`Effect.forEach` of the same effects), `forEachAgents`
 * (`Effect.forEach` over the `Agent.make` agents), `nested<d>` (`corral`'s run nested in `d` enclosing
 * agents, each the only agent of its own run, as a run of tool calls inside an agent is). `root` is a checkout whose `packages/core` to
 * load (default: this one), so an old and a new core can alternate in separate processes. Under
 * `valgrind --tool=callgrind` (with node's `--predictable` and `--perf-basic-prof`) the difference
 * between two run counts gives the instructions per agent; see docs/development.md.
 */
import * as Effect from "effect/Effect"

const [mode = "corral", nArg = "20000", runsArg = "5", sleepArg = "0", concurrencyArg = "64", root] =
  process.argv.slice(2)
const n = Number(nArg)
const runs = Number(runsArg)
const sleepMs = Number(sleepArg)
const concurrency = Number(concurrencyArg)
const core =
  root === undefined ? new URL("../../../packages/core/src/", import.meta.url).href : `${root}/packages/core/src/`
const Agent: typeof import("@corral/core/Agent") = await import(`${core}Agent.ts`)
const Corral: typeof import("@corral/core/Corral") = await import(`${core}Corral.ts`)

const nesting = mode.startsWith("nested") ? Number(mode.slice("nested".length)) : 0
if (!Number.isInteger(nesting) || nesting < 0) throw new Error(`yieldprobe: unknown mode ${mode}`)

const resolved = Promise.resolve()
const work = (i: number) => (sleepMs > 0 ? Effect.sleep(sleepMs) : Effect.promise(() => resolved.then(() => i)))

const succeeded = (
  agents: ReadonlyArray<import("@corral/core/Agent").Agent<unknown>>,
  concurrency: number
): Effect.Effect<void> =>
  Effect.flatMap(Effect.orDie(Corral.run(agents, { concurrency })), (result) =>
    result.allSucceeded ? Effect.void : Effect.die(new Error("an agent did not succeed"))
  )

const once = async (): Promise<void> => {
  const items = Array.from({ length: n }, (_, i) => i)
  if (mode === "forEach") {
    await Effect.runPromise(Effect.forEach(items, work, { concurrency, discard: true }))
    return
  }
  const agents = items.map((i) => Agent.make(`a${i}`, { run: work(i) }))
  if (mode === "forEachAgents") {
    await Effect.runPromise(Effect.forEach(agents, (agent) => agent.run({}), { concurrency }))
    return
  }
  let run = succeeded(agents, concurrency)
  for (let level = 0; level < nesting; level++) run = succeeded([Agent.make(`level${level}`, { run })], 1)
  await Effect.runPromise(run)
}

const gc = (globalThis as { gc?: (options: { type: "minor" }) => void }).gc
const perAgent: Array<number> = []
for (let run = 0; run < runs; run++) {
  await new Promise((resolve) => setImmediate(resolve))
  gc?.({ type: "minor" })
  const before = process.cpuUsage()
  await once()
  const used = process.cpuUsage(before)
  perAgent.push((used.user + used.system) / n)
}
const steady = perAgent.slice(Math.floor(perAgent.length / 2)).sort((a, b) => a - b)
console.log(
  JSON.stringify({
    mode,
    n,
    medianCpuUsPerAgent: Number(steady[Math.floor(steady.length / 2)]!.toFixed(3)),
    cpuUsPerAgent: perAgent.map((us) => Number(us.toFixed(2)))
  })
)
process.exit(0)
