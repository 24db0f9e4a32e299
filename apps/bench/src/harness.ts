import { mkdir, writeFile } from "node:fs/promises"
import os from "node:os"
import { duration, table } from "./format.ts"
import { settle, settleYoung } from "./lib/heap.ts"
import { machine } from "./machine.ts"
import { median, medianMetrics, rotate } from "./stats.ts"
import { verdicts } from "./lib/targets.ts"
import type {
  Approach,
  ApproachResult,
  Case,
  CaseResult,
  Report,
  Sample,
  Scenario,
  ScenarioResult,
  SuiteOptions,
  Verdict
} from "./types.ts"

export const resultsDir = new URL("../bench-results/", import.meta.url)

/** How the bench was started, as a user would type it. */
const commandLine = (): string => ["pnpm bench", ...process.argv.slice(2)].join(" ")

const message = (error: unknown): string => {
  if (error instanceof Error) return error.message || error.name
  if (typeof error === "object" && error !== null && "_tag" in error) return String((error as { _tag: unknown })._tag)
  return String(error)
}

const attempt = async <P>(
  approach: Approach<P>,
  params: P,
  timeoutMs: number,
  gc: "full" | "minor" = "full"
): Promise<Sample> => {
  const controller = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort()
      reject(new Error(`timed out after ${duration(timeoutMs)}`))
    }, timeoutMs)
  })
  await (gc === "full" ? settle() : settleYoung())
  try {
    return await Promise.race([approach.run(params, { signal: controller.signal }), timeout])
  } finally {
    clearTimeout(timer)
  }
}

interface Tally {
  readonly samples: Array<Sample>
  readonly afterGc: Array<number>
  error: string | undefined
}

const repetitions = <P>(scenario: Scenario<P>, item: Case<P>, options: SuiteOptions): number =>
  options.reps ?? (options.quick ? Math.min(3, item.reps ?? scenario.reps ?? 5) : (item.reps ?? scenario.reps ?? 5))

const measure = async <P>(
  scenario: Scenario<P>,
  item: Case<P>,
  approaches: ReadonlyArray<Approach<P>>,
  reps: number
) => {
  const tallies = new Map(approaches.map((a) => [a.name, { samples: [], afterGc: [], error: undefined } as Tally]))
  const timeoutMs = scenario.timeoutMs ?? 120_000
  for (let rep = 0; rep < reps; rep++) {
    for (const approach of rotate(approaches, rep)) {
      const tally = tallies.get(approach.name)!
      if (tally.error !== undefined) continue
      try {
        if (scenario.steadyState) tally.afterGc.push((await attempt(approach, item.params, timeoutMs)).ms)
        else tally.samples.push(await attempt(approach, item.params, timeoutMs))
      } catch (error) {
        tally.error = message(error)
      }
    }
  }
  if (scenario.steadyState) await steady(scenario, item, approaches, reps, timeoutMs, tallies)
  return tallies
}

/**
 * The steady-state samples, taken after every "after GC" sample: a forced full GC frees the hidden
 * classes (maps) of objects no longer alive, which deoptimises every function whose optimised code
 * embeds one (V8's "embedded weak objects cleared"), and re-optimising takes several thousand more
 * calls. A sample taken right after the forced GC's run was still re-tiering (a 10-agent run cost
 * 2–3× its steady CPU). So each approach runs the scenario's `rewarm` (2 unless set) untimed times,
 * then the samples follow with only two young-generation collections before each (`settleYoung`:
 * the run starts with an empty young generation; old-generation garbage is collected as it would be
 * in a running program, by whichever run triggers it; the order is rotated).
 */
const steady = async <P>(
  scenario: Scenario<P>,
  item: Case<P>,
  approaches: ReadonlyArray<Approach<P>>,
  reps: number,
  timeoutMs: number,
  tallies: Map<string, Tally>
) => {
  const live = approaches.filter((a) => tallies.get(a.name)!.error === undefined)
  for (const approach of live) {
    for (let i = 0; i < (scenario.rewarm ?? rewarm); i++)
      await attempt(approach, item.params, timeoutMs, "minor").catch(() => {})
  }
  for (let rep = 0; rep < reps; rep++) {
    for (const approach of rotate(live, rep)) {
      const tally = tallies.get(approach.name)!
      if (tally.error !== undefined) continue
      try {
        tally.samples.push(await attempt(approach, item.params, timeoutMs, "minor"))
      } catch (error) {
        tally.error = message(error)
      }
    }
  }
}

const rewarm = 2

const profile = async <P>(item: Case<P>, approach: Approach<P>, tally: Tally) => {
  if (item.profile === undefined || tally.error !== undefined) return {}
  try {
    return (await attempt(approach, item.profile, 600_000)).metrics ?? {}
  } catch (error) {
    tally.error = `profile: ${message(error)}`
    return {}
  }
}

const summarize = (name: string, tally: Tally, extra: Readonly<Record<string, number>>): ApproachResult => {
  const ms = tally.samples.map((s) => s.ms)
  const ok = tally.error === undefined && ms.length > 0
  return {
    name,
    samplesMs: ms,
    medianMs: ok ? median(ms) : undefined,
    minMs: ok ? Math.min(...ms) : undefined,
    maxMs: ok ? Math.max(...ms) : undefined,
    ratio: undefined,
    metrics: {
      ...medianMetrics(tally.samples.map((s) => s.metrics ?? {})),
      ...(tally.afterGc.length > 0 ? { afterGcMs: median(tally.afterGc) } : {}),
      ...extra
    },
    error: tally.error
  }
}

const withRatios = (
  results: ReadonlyArray<ApproachResult>,
  boundMs: number | undefined,
  floorName: string | undefined
): ReadonlyArray<ApproachResult> => {
  const floor = boundMs ?? results.find((r) => r.name === floorName)?.medianMs
  return results.map((r) => ({ ...r, ratio: floor && r.medianMs !== undefined ? r.medianMs / floor : undefined }))
}

const warmup = async <P>(scenario: Scenario<P>, item: Case<P>, approaches: ReadonlyArray<Approach<P>>) => {
  for (const approach of approaches) await attempt(approach, item.params, scenario.timeoutMs ?? 120_000).catch(() => {})
}

const runCase = async <P>(
  scenario: Scenario<P>,
  item: Case<P>,
  options: SuiteOptions,
  first: boolean
): Promise<CaseResult> => {
  const approaches = item.approaches ?? scenario.approaches
  const reps = repetitions(scenario, item, options)
  if (first && scenario.warmup) await warmup(scenario, item, approaches)
  const tallies = await measure(scenario, item, approaches, reps)
  const results: Array<ApproachResult> = []
  for (const approach of approaches) {
    const tally = tallies.get(approach.name)!
    const extra = await profile(item, approach, tally)
    results.push(summarize(approach.name, tally, extra))
  }
  const floorApproach = item.boundMs === undefined ? scenario.floorApproach : undefined
  return {
    label: item.label,
    reps,
    boundMs: item.boundMs,
    floorApproach,
    notes: item.notes ?? [],
    approaches: withRatios(results, item.boundMs, floorApproach)
  }
}

const verdictLine = (verdict: Verdict): string => {
  const state =
    verdict.met === undefined
      ? "not evaluated"
      : verdict.met
        ? "met"
        : verdict.outOfReach === true
          ? "NOT MET (out of reach: the floor is at or over the target)"
          : verdict.withinNoise === true
            ? "NOT MET (within noise)"
            : "NOT MET"
  return `${verdict.target} — ${state} (${verdict.figure})`
}

const printHeader = (scenario: Scenario): void => {
  console.log(`\n=== ${scenario.name} ===`)
  console.log(scenario.description)
  console.log(`floor: ${scenario.floor}`)
  for (const target of scenario.targets ?? []) console.log(`target: ${target.label}`)
}

const caseText = (scenario: Scenario, result: CaseResult): string => {
  const bound = result.boundMs === undefined ? "" : `, bound ${duration(result.boundMs)}`
  return [
    `-- ${result.label} (${result.reps} reps, order rotated${bound}) --`,
    ...result.notes.map((note) => `   ${note}`),
    table(result, scenario.columns ?? [])
  ].join("\n")
}

const save = async (name: string, data: unknown): Promise<string> => {
  await mkdir(resultsDir, { recursive: true })
  const file = new URL(`${name}.json`, resultsDir)
  await writeFile(file, `${JSON.stringify(data, null, 2)}\n`)
  return file.pathname
}

export const printReport = async (report: Report, elapsedMs: number, loadStart?: number): Promise<void> => {
  console.log(`\n=== ${report.name} ===\n${report.text}`)
  const saved = {
    scenario: report.name,
    startedAt: new Date(Date.now() - elapsedMs).toISOString(),
    elapsedMs,
    command: commandLine(),
    loadAverage: { start: loadStart, end: os.loadavg()[0]! },
    machine: machine(),
    text: report.text,
    data: report.data,
    ...(report.targets === undefined ? {} : { targets: report.targets })
  }
  for (const verdict of report.targets ?? []) console.log(`verdict: ${verdictLine(verdict)}`)
  console.log(`\n(${duration(elapsedMs)}; saved ${await save(report.name, saved)})`)
}

export const runScenario = async (scenario: Scenario, options: SuiteOptions): Promise<ScenarioResult> => {
  const started = Date.now()
  const loadStart = os.loadavg()[0]!
  printHeader(scenario)
  const cases: Array<CaseResult> = []
  for (const item of await scenario.cases(options)) {
    const measured = await runCase(scenario, item, options, cases.length === 0)
    const text = caseText(scenario, measured)
    console.log(`\n${text}`)
    cases.push({ ...measured, table: text })
  }
  const result: ScenarioResult = {
    scenario: scenario.name,
    description: scenario.description,
    floor: scenario.floor,
    targets: verdicts(scenario.targets ?? [], cases),
    startedAt: new Date(started).toISOString(),
    elapsedMs: Date.now() - started,
    command: commandLine(),
    loadAverage: { start: loadStart, end: os.loadavg()[0]! },
    machine: machine(),
    cases
  }
  for (const verdict of result.targets) console.log(`verdict: ${verdictLine(verdict)}`)
  console.log(`\n(${duration(result.elapsedMs)}; saved ${await save(result.scenario, result)})`)
  return result
}
