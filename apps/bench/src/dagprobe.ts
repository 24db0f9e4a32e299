/**
 * The `dag` bench case outside the harness. `node src/dagprobe.ts offline [restarts] [graphs]`: virtual-time
 * makespans (exact durations, no CPU) of the bench graph under longest-path-first (corral's policy with
 * estimates, also run through `Corral.run` under `TestClock`), FIFO, other list-scheduling priorities
 * and the best of `restarts` random-priority list schedules, against the bound; then the same
 * policies on `graphs` other random DAGs at concurrency 4, 16 and 64. `node src/dagprobe.ts cpu
 * [runs] [warm-up] [estimates|none]`: corral on the bench graph in real time, median
 * `process.cpuUsage()` per run. `node src/dagprobe.ts virtual [runs] [estimates|none]`: `runs` runs under
 * `TestClock` (deterministic, for callgrind). `node --expose-gc src/dagprobe.ts split [reps] [name] [warm]`: the
 * scenario's approaches (those whose name includes `name`) in rotated order, each after a
 * young-generation GC, and the medians of their makespan and its split; with `warm` (0 unless
 * given), each approach first runs `warm` untimed times, as the bench's steady samples follow the
 * after-GC samples and two untimed runs of each approach (a process's first runs execute code not
 * yet optimised: their tail after the last node is longer than a warm run's). `node --expose-gc
 * src/dagprobe.ts startup [reps]`: a run's start-up phases (see there). `node src/dagprobe.ts setup [reps] [make|validate|run]`:
 * `reps` runs of the bench's agents with `run` ending at once, or only their making (and checking and
 * linking as a run does) (deterministic, for callgrind). `node --expose-gc src/dagprobe.ts tail [reps]
 * [warm]`: the bench's `1st start` and `after last` split (see there). `CORRAL_CORE` names another copy of `packages/core/src/index.ts`
 * (A/B in alternating processes).
 */
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import { mulberry32 } from "./lib/async.ts"
import { settleYoung } from "./lib/heap.ts"
import { dagPlan, simulate } from "./lib/replay.ts"
import { type DagNode, randomDag, remainingPath } from "./lib/workload.ts"
import { dag } from "./scenarios/dag.ts"

const { Agent, Corral }: typeof import("@corral/core") = await import(process.env.CORRAL_CORE ?? "@corral/core")
const [mode = "offline", a, b, c] = process.argv.slice(2)
const median = (values: Array<number>) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)]!

const boundOf = (nodes: ReadonlyArray<DagNode>, concurrency: number): number =>
  Math.max(Math.max(...remainingPath(nodes)), nodes.reduce((sum, node) => sum + node.ms, 0) / concurrency)

/** List scheduling in virtual time: nodes offered a slot in `order` whenever nodes end. */
const listMakespan = (nodes: ReadonlyArray<DagNode>, order: ReadonlyArray<number>, concurrency: number): number => {
  const done = new Uint8Array(nodes.length)
  return simulate({
    durations: nodes.map((node) => node.ms),
    concurrency,
    order,
    ready: (i) => nodes[i]!.deps.every((dep) => done[dep] === 1),
    onStart: () => {},
    onEnd: (i) => {
      done[i] = 1
    },
    follows: (i) => nodes[i]!.deps
  }).makespanMs
}

const byKeys = (nodes: ReadonlyArray<DagNode>, ...keys: Array<ReadonlyArray<number>>): Array<number> =>
  nodes
    .map((_, i) => i)
    .sort((x, y) => {
      for (const key of keys) if (key[x] !== key[y]) return key[y]! - key[x]!
      return x - y
    })

/** Work of every node reachable from each node, itself included. */
const descendantWork = (nodes: ReadonlyArray<DagNode>): ReadonlyArray<number> => {
  const dependents = nodes.map(() => [] as Array<number>)
  for (const node of nodes) for (const dep of node.deps) dependents[dep]!.push(node.index)
  return nodes.map((node) => {
    const seen = new Set<number>([node.index])
    const stack = [node.index]
    let work = 0
    while (stack.length > 0) {
      const i = stack.pop()!
      work += nodes[i]!.ms
      for (const next of dependents[i]!) {
        if (seen.has(next)) continue
        seen.add(next)
        stack.push(next)
      }
    }
    return work
  })
}

interface Policies {
  readonly lpf: number
  readonly fifo: number
  readonly lpfDescendants: number
  readonly lpfLongest: number
  readonly cpPlusWork: number
  readonly best: number
}

const policies = (nodes: ReadonlyArray<DagNode>, concurrency: number, restarts: number, seed: number): Policies => {
  const remaining = remainingPath(nodes)
  const descendants = descendantWork(nodes)
  const ms = nodes.map((node) => node.ms)
  const index = nodes.map((node) => -node.index)
  const mixed = nodes.map((_, i) => remaining[i]! + descendants[i]! / concurrency)
  const random = mulberry32(seed)
  const found = {
    lpf: listMakespan(nodes, byKeys(nodes, remaining), concurrency),
    fifo: listMakespan(nodes, byKeys(nodes, index), concurrency),
    lpfDescendants: listMakespan(nodes, byKeys(nodes, remaining, descendants), concurrency),
    lpfLongest: listMakespan(nodes, byKeys(nodes, remaining, ms), concurrency),
    cpPlusWork: listMakespan(nodes, byKeys(nodes, mixed), concurrency)
  }
  let best = Math.min(...Object.values(found))
  for (let r = 0; r < restarts; r++) {
    // Half the restarts: fully random priorities; half: longest path with random noise of up to 30%.
    const noise = nodes.map((_, i) => (r % 2 === 0 ? random() : remaining[i]! * (1 + 0.3 * random())))
    best = Math.min(best, listMakespan(nodes, byKeys(nodes, noise), concurrency))
  }
  return { ...found, best }
}

/** corral's own makespan for `nodes` under `TestClock` (each node sleeps exactly its duration). */
const corralVirtual = (nodes: ReadonlyArray<DagNode>, concurrency: number, estimates: boolean): Promise<number> => {
  const ends = new Array<number>(nodes.length).fill(0)
  const agents = nodes.map((node) =>
    Agent.make(node.id, {
      run: Effect.andThen(
        Effect.sleep(node.ms),
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            ends[node.index] = clock.currentTimeMillisUnsafe()
          })
        )
      ),
      dependsOn: node.deps.map((dep) => nodes[dep]!.id),
      ...(estimates ? { estimate: node.ms } : {})
    })
  )
  return Effect.runPromise(
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Corral.run(agents, { concurrency }), { startImmediately: true })
      yield* Effect.yieldNow
      while (fiber.pollUnsafe() === undefined) {
        yield* TestClock.adjust(1)
        yield* Effect.yieldNow
      }
      const result = yield* Fiber.join(fiber)
      if (!result.allSucceeded) throw new Error("a dag run in virtual time failed")
      return Math.max(...ends)
    }).pipe(Effect.provide(TestClock.layer()))
  )
}

const ratio = (ms: number, bound: number) => `${ms} ms = ${(ms / bound).toFixed(4)}×`

if (mode === "offline") {
  const restarts = Number(a ?? 300)
  const graphs = Number(b ?? 30)
  const nodes = randomDag(11, 500)
  const bound = boundOf(nodes, 16)
  const critical = Math.max(...remainingPath(nodes))
  const found = policies(nodes, 16, restarts, 1)
  console.log(`bench graph (seed 11, 500 nodes @16): bound ${bound} ms (critical path ${critical} ms, work / 16)`)
  for (const [name, ms] of Object.entries(found)) console.log(`  ${name.padEnd(15)} ${ratio(ms, bound)} the bound`)
  console.log(`  corral (estimates)    ${ratio(await corralVirtual(nodes, 16, true), bound)} the bound (TestClock)`)
  console.log(`  corral (no estimates) ${ratio(await corralVirtual(nodes, 16, false), bound)} the bound (TestClock)`)
  console.log(`best schedule found offline: ${(found.best / bound).toFixed(4)}× the bound (${restarts} restarts)`)
  console.log(
    `the least possible with whole-millisecond durations: ${Math.ceil(bound)} ms = ${(Math.ceil(bound) / bound).toFixed(4)}×`
  )
  for (const concurrency of [4, 16, 64]) {
    const sums: Record<string, number> = {}
    let worstVsLpf = 0
    for (let g = 0; g < graphs; g++) {
      const graph = randomDag(1000 + g, 500)
      const graphBound = boundOf(graph, concurrency)
      const result = policies(graph, concurrency, Math.min(restarts, 60), g)
      for (const [name, ms] of Object.entries(result)) sums[name] = (sums[name] ?? 0) + ms / graphBound
      worstVsLpf = Math.max(worstVsLpf, result.lpf / result.best)
    }
    const means = Object.entries(sums)
      .map(([name, sum]) => `${name} ${(sum / graphs).toFixed(4)}`)
      .join(", ")
    console.log(
      `${graphs} random DAGs @${concurrency}, mean × bound: ${means}; worst lpf / best ${worstVsLpf.toFixed(4)}`
    )
  }
  const plan = dagPlan(
    nodes.map((node) => node.deps),
    nodes.map((node) => node.ms),
    remainingPath(nodes),
    16
  )
  console.log(`dagPlan (the replay's plan): ${ratio(plan.makespanMs, bound)} the bound`)
} else if (mode === "virtual") {
  // Deterministic work for instruction counts (callgrind): `runs` corral runs of the bench graph under TestClock.
  const nodes = randomDag(11, 500)
  let makespan = 0
  for (let i = 0; i < Number(a ?? 3); i++) makespan = await corralVirtual(nodes, 16, b !== "none")
  console.log(JSON.stringify({ makespanMs: makespan }))
} else if (mode === "startup") {
  // A run's start on the bench graph, each after a young-generation GC: making the agents, `validate`,
  // `link`, and from the `Corral.run` call to the first node's start (medians of `reps`).
  const source = path.dirname(process.env.CORRAL_CORE ?? fileURLToPath(import.meta.resolve("@corral/core")))
  const { validate } = await import(path.join(source, "internal/validate.ts"))
  const { link } = await import(path.join(source, "internal/node.ts"))
  const nodes = randomDag(11, 500)
  const settings = { concurrency: 16, pools: {}, claimTimeout: undefined, poolScope: "" }
  const make = () =>
    nodes.map((node) =>
      Agent.make(node.id, { run: Effect.void, dependsOn: node.deps.map((dep) => nodes[dep]!.id), estimate: node.ms })
    )
  const phases = { makeMs: [] as Array<number>, validateMs: [] as Array<number>, linkMs: [] as Array<number> }
  const firsts: Array<number> = []
  for (let rep = 0; rep < Number(a ?? 20); rep++) {
    await settleYoung()
    const t0 = performance.now()
    const agents = make()
    const t1 = performance.now()
    const linked = validate(agents, settings).success
    const t2 = performance.now()
    link(linked)
    phases.makeMs.push(t1 - t0)
    phases.validateMs.push(t2 - t1)
    phases.linkMs.push(performance.now() - t2)
    await settleYoung()
    let first = 0
    const timed = nodes.map((node) =>
      Agent.make(node.id, {
        run: Effect.suspend(() => {
          if (first === 0) first = performance.now()
          return Effect.void
        }),
        dependsOn: node.deps.map((dep) => nodes[dep]!.id),
        estimate: node.ms
      })
    )
    const called = performance.now()
    await Effect.runPromise(Corral.run(timed, { concurrency: 16 }))
    firsts.push(first - called)
  }
  const medians = Object.entries(phases).map(([key, values]) => [key, Number(median(values).toFixed(3))])
  console.log(JSON.stringify({ ...Object.fromEntries(medians), runToFirstStartMs: Number(median(firsts).toFixed(3)) }))
} else if (mode === "setup") {
  // Deterministic work for instruction counts (callgrind): `reps` times, the bench's 500 agents (with
  // estimates, `run` an effect that ends at once) made and run through `Corral.run` at concurrency 16:
  // the run's set-up, each agent's start and end, and the run's result. `reps` minus 0 excludes start-up.
  // With `make` only the agents are made; with `validate` they are also checked and linked as a run does.
  const phase = b ?? "run"
  const source = path.dirname(process.env.CORRAL_CORE ?? fileURLToPath(import.meta.resolve("@corral/core")))
  const { validate } = await import(path.join(source, "internal/validate.ts"))
  const { link } = await import(path.join(source, "internal/node.ts"))
  const settings = { concurrency: 16, pools: {}, claimTimeout: undefined, poolScope: "" }
  const nodes = randomDag(11, 500)
  let succeeded = 0
  for (let rep = 0; rep < Number(a ?? 20); rep++) {
    const agents = nodes.map((node) =>
      Agent.make(node.id, { run: Effect.void, dependsOn: node.deps.map((dep) => nodes[dep]!.id), estimate: node.ms })
    )
    if (phase === "make") succeeded += agents.length === nodes.length ? 1 : 0
    else if (phase === "validate") {
      const made = validate(agents, settings, true)
      link(made.success)
      succeeded += made.success.length === nodes.length ? 1 : 0
    } else if ((await Effect.runPromise(Corral.run(agents, { concurrency: 16 }))).allSucceeded) succeeded++
  }
  console.log(JSON.stringify({ succeeded }))
} else if (mode === "tail") {
  // Where the bench's `1st start` and `after last` go, each run after a young-generation GC as the
  // harness's steady samples (medians of `reps` after `warm` untimed runs): making the agents, from
  // the `Corral.run` call to the first start, from the last node's end to the run's result (corral's
  // own end), and from the result to the `await` of `Effect.runPromise` resuming (effect's and the
  // promise's part).
  const nodes = randomDag(11, 500)
  const warm = Number(b ?? 3)
  const rows = { makeUs: [] as Array<number>, toFirstUs: [] as Array<number>, endToResultUs: [] as Array<number> }
  const awaited: Array<number> = []
  for (let rep = 0; rep < warm + Number(a ?? 9); rep++) {
    await settleYoung()
    let first = 0
    let last = 0
    let result = 0
    const t0 = performance.now()
    const agents = nodes.map((node) =>
      Agent.make(node.id, {
        run: Effect.suspend(() => {
          if (first === 0) first = performance.now()
          return Effect.sleep(node.ms)
        }).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              last = performance.now()
            })
          )
        ),
        dependsOn: node.deps.map((dep) => nodes[dep]!.id),
        estimate: node.ms
      })
    )
    const t1 = performance.now()
    const run = Effect.map(Corral.run(agents, { concurrency: 16 }), (done) => {
      result = performance.now()
      return done.allSucceeded
    })
    if (!(await Effect.runPromise(run, { signal: new AbortController().signal }))) throw new Error("a run failed")
    const t2 = performance.now()
    if (rep < warm) continue
    rows.makeUs.push((t1 - t0) * 1000)
    rows.toFirstUs.push((first - t1) * 1000)
    rows.endToResultUs.push((result - last) * 1000)
    awaited.push((t2 - result) * 1000)
  }
  const medians = Object.entries(rows).map(([key, values]) => [key, Math.round(median(values))])
  console.log(JSON.stringify({ ...Object.fromEntries(medians), resultToAwaitUs: Math.round(median(awaited)) }))
} else if (mode === "split") {
  // The bench case's approaches in rotated order, each run after a young-generation GC as the harness's
  // steady-state samples: medians of each approach's makespan and its split (see the scenario's notes).
  const reps = Number(a ?? 10)
  const item = (await dag.cases({ quick: false, reps: undefined }))[0]!
  const signal = new AbortController().signal
  const approaches = dag.approaches.filter((approach) => b === undefined || approach.name.includes(b))
  for (const approach of approaches)
    for (let i = 0; i < Number(c ?? 0); i++) await approach.run(item.params, { signal })
  const metrics = new Map<string, Array<Record<string, number>>>()
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < approaches.length; k++) {
      const approach = approaches[(k + rep) % approaches.length]!
      await settleYoung()
      const sample = await approach.run(item.params, { signal })
      const list = metrics.get(approach.name) ?? []
      list.push({ ms: sample.ms, ...sample.metrics })
      metrics.set(approach.name, list)
    }
  }
  for (const [name, list] of metrics) {
    const keys = Object.keys(list[0]!)
    const cells = keys.map((key) => `${key} ${median(list.map((m) => m[key]!)).toFixed(2)}`)
    console.log(`${name.padEnd(40)} ${cells.join("  ")}`)
  }
} else {
  const runs = Number(a ?? 20)
  const warm = Number(b ?? 5)
  const estimates = c !== "none"
  const nodes = randomDag(11, 500)
  const cpu: Array<number> = []
  const wall: Array<number> = []
  for (let i = 0; i < warm + runs; i++) {
    const agents = nodes.map((node) =>
      Agent.make(node.id, {
        run: Effect.sleep(node.ms),
        dependsOn: node.deps.map((dep) => nodes[dep]!.id),
        ...(estimates ? { estimate: node.ms } : {})
      })
    )
    const start = performance.now()
    const before = process.cpuUsage()
    const result = await Effect.runPromise(Corral.run(agents, { concurrency: 16 }))
    const used = process.cpuUsage(before)
    if (!result.allSucceeded) throw new Error("a run failed")
    if (i < warm) continue
    cpu.push((used.user + used.system) / 1000)
    wall.push(performance.now() - start)
  }
  console.log(
    JSON.stringify({ cpuMsPerRun: median(cpu), min: Math.min(...cpu), max: Math.max(...cpu), wallMs: median(wall) })
  )
}
process.exit(0)
