/**
 * What the seeded interruption sweeps of `corral run` share (`crash.e2e` kills it with SIGKILL,
 * `stop.e2e` stops it with SIGINT/SIGTERM): the plan of agents that each
 * write their own file and every third one a shared file, its JSON events and the processes a run
 * left.
 */
import * as NodeFs from "node:fs"
import { expect } from "vitest"
import { type CliRun, isAlive } from "../../helpers.ts"

/**
 * A plan of `count` agents `<prefix>1`… at `concurrency`: each appends its id to `out/<id>.txt`
 * (claimed), every third also to `shared/log.txt` (claimed too), then sleeps
 * `0.<(i × step) mod modulo>` s.
 */
export const sweepPlan = (options: {
  readonly prefix: string
  readonly count: number
  readonly concurrency: number
  readonly step: number
  readonly modulo: number
}): string => {
  const agents = Array.from({ length: options.count }, (_, i) => {
    const id = `${options.prefix}${i + 1}`
    const shared = i % 3 === 0 ? ", shared/log.txt" : ""
    const append = i % 3 === 0 ? ` && echo ${id} >> shared/log.txt` : ""
    return `  - id: ${id}
    run: mkdir -p out shared && echo ${id} >> out/${id}.txt${append} && sleep 0.${(i * options.step) % options.modulo}
    claims: { write: [out/${id}.txt${shared}] }
`
  }).join("")
  return `version: 1\nconcurrency: ${options.concurrency}\nagents:\n${agents}`
}

/** The JSON events in a `--json` run's output so far. */
export const events = (output: string) =>
  output
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as { type: string; runId?: string; agentId?: string; path?: string })

/** The live processes whose environment names run `runId` (`CORRAL_RUN_ID`). */
export const processesOf = (runId: string): Array<number> =>
  NodeFs.readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      try {
        return (
          NodeFs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`CORRAL_RUN_ID=${runId}`) &&
          isAlive(pid)
        )
      } catch {
        return false
      }
    })

/** The exit code of a run a signal stopped: 129 after SIGHUP, 130 after SIGINT or SIGTERM. */
export const stopExitCode = (signal: NodeJS.Signals): number => (signal === "SIGHUP" ? 129 : 130)

/**
 * The exit of a `corral run` signalled early: 130 (129 after SIGHUP), or 0 when the run had already ended. A signal
 * before corral's bin runs (Node's own start-up, no handler installed yet, no run id printed) ends
 * it by the signal's default action, nothing started; from the bin's first line on corral handles
 * it (`EarlySignals`, run.e2e).
 */
export const expectEarlyStopExit = (
  ended: CliRun,
  signal: NodeJS.Signals,
  runId: string | undefined,
  context: string
): void => {
  if (ended.code === null && ended.signal === signal && runId === undefined) return
  expect(
    [0, stopExitCode(signal)],
    `exit code ${ended.code}, signal ${ended.signal} (${context}): ${ended.stderr}${ended.stdout}`
  ).toContain(ended.code)
}
