import * as inspector from "node:inspector/promises"
import * as fs from "node:fs"
const s = new inspector.Session(); s.connect()
await s.post("HeapProfiler.enable")
// warm-up handled by probe args; sample everything incl. collected
await s.post("HeapProfiler.startSampling", { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
process.argv.splice(2, 0, "cpu", process.env.RUNS ?? "5", "0")
await import("/work/wt/claims/apps/bench/src/claimprobe.ts")
const { profile } = await s.post("HeapProfiler.stopSampling")
fs.writeFileSync(process.env.OUT!, JSON.stringify({ head: profile.head }))
