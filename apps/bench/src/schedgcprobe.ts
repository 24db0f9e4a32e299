/**
 * What the young and old generations do in each run of the scheduling scenario's yielding case,
 * run through the bench's own harness (warm-up, after-GC samples, re-warm, steady samples, the
 * profiled run, in that order and rotation):
 * `node --expose-gc --max-old-space-size=8192 src/schedgcprobe.ts <n> [approaches] [reps]`, where
 * `approaches` is a comma-separated list of the scenario's approach names (default: all of them).
 * Prints one JSON line per run: its phase, the sample's figures, the CPU per task of the main thread
 * and of every other thread (V8's helpers: parallel scavenge, concurrent marking and sweeping) and,
 * from `v8.GCProfiler`, the
 * scavenges (count, pause ms, MB promoted to old space, MB left in new space), incremental-marking
 * steps and mark-compacts inside the run, with the new space's size and the old space's use at the
 * run's start. Then the harness's own table. See docs/development.md (session 27).
 */
import { GCProfiler, getHeapSpaceStatistics, type HeapSpaceInfo } from "node:v8"
import { runScenario } from "./harness.ts"
import { scheduling } from "./scenarios/scheduling.ts"
import type { Approach, Case } from "./types.ts"

type Params = Parameters<(typeof scheduling.approaches)[number]["run"]>[0]
type Stat = ReturnType<GCProfiler["stop"]> extends infer R ? (R extends { statistics: infer S } ? S : never) : never
type Entry = Stat extends ReadonlyArray<infer E> ? E : never

const [nArg = "100000", namesArg = "all", repsArg = "5"] = process.argv.slice(2)
const n = Number(nArg)
const reps = Number(repsArg)
if (!Number.isInteger(n) || n < 1) throw new Error(`schedgcprobe: n must be a positive integer, got ${nArg}`)
if (!Number.isInteger(reps) || reps < 1)
  throw new Error(`schedgcprobe: reps must be a positive integer, got ${repsArg}`)
const names = namesArg === "all" ? scheduling.approaches.map((a) => a.name) : namesArg.split(",")
const unknown = names.filter((name) => !scheduling.approaches.some((a) => a.name === name))
if (unknown.length > 0) throw new Error(`schedgcprobe: unknown approach ${unknown.join(", ")}`)

const total = (usage: NodeJS.CpuUsage): number => usage.user + usage.system

const mb = (bytes: number): number => Number((bytes / 2 ** 20).toFixed(2))

const space = (spaces: ReadonlyArray<HeapSpaceInfo>, name: string): HeapSpaceInfo =>
  spaces.find((s) => s.space_name === name)!

const used = (entry: Entry, when: "beforeGC" | "afterGC", name: string): number =>
  entry[when].heapSpaceStatistics.find((s) => s.spaceName === name)?.spaceUsedSize ?? 0

const summary = (stats: Stat) => {
  const of = (type: string) => stats.filter((e) => e.gcType === type)
  const scavenges = of("Scavenge")
  const ms = (entries: ReadonlyArray<Entry>) => Number((entries.reduce((s, e) => s + e.cost, 0) / 1000).toFixed(2))
  return {
    scavenges: scavenges.length,
    scavengeMs: ms(scavenges),
    promotedMB: mb(
      scavenges.reduce((s, e) => s + used(e, "afterGC", "old_space") - used(e, "beforeGC", "old_space"), 0)
    ),
    survivedMB: mb(scavenges.reduce((s, e) => s + used(e, "afterGC", "new_space"), 0)),
    markingSteps: of("IncrementalMarking").length,
    markingMs: ms(of("IncrementalMarking")),
    markCompacts: of("MarkSweepCompact").length,
    markCompactMs: ms(of("MarkSweepCompact"))
  }
}

const approaches = scheduling.approaches.filter((a) => names.includes(a.name))
const phases = [
  ...Array<string>(approaches.length).fill("warmup"),
  ...Array<string>(reps * approaches.length).fill("afterGc"),
  ...Array<string>((scheduling.rewarm ?? 2) * approaches.length).fill("rewarm"),
  ...Array<string>(reps * approaches.length).fill("steady")
]
let index = 0

const traced = (approach: Approach<Params>): Approach<Params> => ({
  name: approach.name,
  run: async (params, context) => {
    const phase = params.profile ? "profile" : (phases[index] ?? "extra")
    index++
    const spaces = getHeapSpaceStatistics()
    const start = {
      newSpaceMB: mb(space(spaces, "new_space").space_size),
      oldUsedMB: mb(space(spaces, "old_space").space_used_size)
    }
    const profiler = new GCProfiler()
    profiler.start()
    const all = process.cpuUsage()
    const main = process.threadCpuUsage()
    const sample = await approach.run(params, context)
    const allUs = total(process.cpuUsage(all))
    const mainUs = total(process.threadCpuUsage(main))
    const gc = summary(profiler.stop()?.statistics ?? [])
    const m = sample.metrics ?? {}
    console.log(
      JSON.stringify({
        n,
        phase,
        approach: approach.name,
        ms: Number(sample.ms.toFixed(2)),
        cpuUs: m.cpuUsPerTask === undefined ? undefined : Number(m.cpuUsPerTask.toFixed(3)),
        mainCpuUs: Number((mainUs / n).toFixed(3)),
        helperCpuUs: Number(((allUs - mainUs) / n).toFixed(3)),
        ...start,
        ...gc
      })
    )
    return sample
  }
})

const base = (await scheduling.cases({ quick: false, reps: undefined })).find(
  (c) => c.params.yielding && c.params.n === 100_000
)!
const item: Case<Params> = {
  label: `N = ${n.toLocaleString("en-US")}, concurrency 64, yielding agents (schedgcprobe)`,
  params: { ...base.params, n },
  profile: { ...base.profile!, n },
  reps
}
await runScenario(
  { ...scheduling, name: "schedgcprobe", approaches: approaches.map(traced), cases: () => [item], targets: [] },
  { quick: false, reps }
)
process.exit(0)
