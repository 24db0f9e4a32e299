/**
 * What a run pays before its first agent starts, outside a run: `node src/validateprobe.ts
 * [claims|dag] [reps]` builds the agents of the `claims` bench (2,000 agents, 1–3 of 50 keys
 * written) or of the `dag` bench (the 500-node graph, with estimates) with `Agent.make` and
 * checks them with core's validator as `Corral.run` does, `reps` times, then prints the median
 * time of each per rep. Under `valgrind --tool=callgrind node --single-threaded`, the difference
 * between `reps` and `0` is the instruction count of `reps` builds and checks, start-up excluded.
 * `CORRAL_CORE` names another copy of `packages/core/src/index.ts` (A/B of two versions).
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { claimJobs, randomDag } from "./lib/workload.ts"

const index = process.env.CORRAL_CORE ?? fileURLToPath(import.meta.resolve("@corral/core"))
const { Agent }: typeof import("@corral/core") = await import(index)
const { validate, noPools }: typeof import("../../../packages/core/src/internal/validate.ts") = await import(
  path.join(path.dirname(index), "internal", "validate.ts")
)

const [what = "claims", repsArg = "100"] = process.argv.slice(2)
const reps = Number(repsArg)
if (!Number.isInteger(reps) || reps < 0) throw new Error(`reps must be a whole number, got ${repsArg}`)

const makeAgents = (): (() => ReadonlyArray<import("@corral/core").Agent.Any>) => {
  if (what === "claims") {
    const jobs = claimJobs(7, 2000, 50)
    return () => jobs.map((job) => Agent.make(job.id, { run: Effect.sleep(2), claims: { write: job.keys } }))
  }
  if (what === "dag") {
    const nodes = randomDag(11, 500)
    return () =>
      nodes.map((node) =>
        Agent.make(node.id, {
          run: Effect.sleep(node.ms),
          dependsOn: node.deps.map((dep) => nodes[dep]!.id),
          estimate: node.ms
        })
      )
  }
  throw new Error(`unknown workload ${what}: claims or dag`)
}

const build = makeAgents()
const settings = { concurrency: what === "claims" ? 32 : 16, pools: noPools, claimTimeout: undefined, poolScope: "" }
const median = (values: Array<number>) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN
const made: Array<number> = []
const checked: Array<number> = []
let count = 0
for (let i = 0; i < reps; i++) {
  const started = performance.now()
  const agents = build()
  const built = performance.now()
  const nodes = validate(agents, settings, true)
  checked.push(performance.now() - built)
  made.push(built - started)
  if (nodes._tag === "Failure") throw new Error(nodes.failure.message)
  count += nodes.success?.length ?? 0
}
console.log(
  JSON.stringify({ what, reps, nodes: count, makeUs: median(made) * 1000, validateUs: median(checked) * 1000 })
)
