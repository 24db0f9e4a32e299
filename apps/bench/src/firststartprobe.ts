/**
 * The time and CPU from the call to the first agent's start, for 2,000 claim agents (`claims`, the
 * claims bench's workload) or the dag's 500 nodes (`dag`): `node --expose-gc src/firststartprobe.ts
 * <claims|dag> [rounds] [warm-up]` loads two cores (A: `CORRAL_CORE_A`, B: `CORRAL_CORE`, each a
 * `packages/core/src/index.ts`, defaulting to `@corral/core`) and alternates them run by run (the
 * order swapped every round), each after a young GC, and prints their medians and the median of the
 * paired differences. The agents are made inside the timed window (`Agent.make` is the caller's
 * part of the start); the first start is synchronous inside `Effect.runPromise`, so wall time there
 * is CPU unless the thread is preempted. CPU is `process.cpuUsage()` (the whole process:
 * `process.threadCpuUsage()` on Linux reads the thread's time only as of its last tick or switch, so
 * a 1 ms window reads 0 or a whole tick). Run A/A (two copies of one core) and both orders: the
 * second-loaded core read ≈ 0.1 ms slower at the first start in an A/A of two main copies.
 */
import * as Effect from "effect/Effect"
import { settleYoung } from "./lib/heap.ts"
import { claimJobs, randomDag } from "./lib/workload.ts"

type Core = typeof import("@corral/core")
const load = (path: string | undefined): Promise<Core> => import(path ?? "@corral/core")
const [shape = "claims", a, b] = process.argv.slice(2)
const rounds = Number(a ?? 25)
const warm = Number(b ?? 3)
const A = await load(process.env.CORRAL_CORE_A)
const B = await load(process.env.CORRAL_CORE)

interface Sample {
  readonly firstMs: number
  readonly firstCpuMs: number
  readonly runCpuMs: number
}

const jobs = claimJobs(7, 2000, 50)
const nodes = randomDag(11, 500)
const cpuMs = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

const agentsOf = (core: Core, began: () => void) =>
  shape === "claims"
    ? jobs.map((job) =>
        core.Agent.make(job.id, {
          run: Effect.suspend(() => {
            began()
            return Effect.sleep(2)
          }),
          claims: { write: job.keys }
        })
      )
    : nodes.map((node) =>
        core.Agent.make(node.id, {
          run: Effect.suspend(() => {
            began()
            return Effect.sleep(node.ms)
          }),
          dependsOn: node.deps.map((dep) => nodes[dep]!.id),
          estimate: node.ms
        })
      )

const once = (core: Core): Promise<Sample> => {
  let first = -1
  let firstCpu = 0
  const began = (): void => {
    if (first >= 0) return
    first = performance.now()
    firstCpu = cpuMs()
  }
  const t0 = performance.now()
  const c0 = cpuMs()
  const effect = core.Corral.run(agentsOf(core, began) as never, { concurrency: shape === "claims" ? 32 : 16 })
  return Effect.runPromise(effect).then((result) => {
    if (!result.allSucceeded) throw new Error("a run failed")
    return { firstMs: first - t0, firstCpuMs: firstCpu - c0, runCpuMs: cpuMs() - c0 }
  })
}

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((x, y) => x - y)
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const samples: { A: Array<Sample>; B: Array<Sample> } = { A: [], B: [] }
for (let i = 0; i < warm + rounds; i++) {
  const order: Array<["A" | "B", Core]> =
    i % 2
      ? [
          ["B", B],
          ["A", A]
        ]
      : [
          ["A", A],
          ["B", B]
        ]
  for (const [name, core] of order) {
    await settleYoung()
    const sample = await once(core)
    if (i >= warm) samples[name].push(sample)
  }
}
for (const key of ["firstMs", "firstCpuMs", "runCpuMs"] as const) {
  const as = samples.A.map((s) => s[key])
  const bs = samples.B.map((s) => s[key])
  const diffs = bs.map((x, i) => x - as[i]!)
  const lower = diffs.filter((d) => d < 0).length
  console.log(
    `${key}: A ${median(as).toFixed(3)} B ${median(bs).toFixed(3)} paired B-A ${median(diffs).toFixed(3)} (B lower in ${lower}/${diffs.length})`
  )
}
