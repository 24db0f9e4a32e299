/**
 * One case of `workspaces-real` narrowed to a few rows, for A/B comparisons on a loaded machine:
 * `node src/realprobe.ts <approaches> <pairs> <N> [VARIABLE valueA valueB]` prepares the scenario's
 * cases with `TMPDIR=/dev/shm` (so both of its locations are tmpfs) and takes the one at concurrency
 * N, then per pair runs `xargs -P N` and each approach (comma-separated rows: `corral`, `corral
 * sparse`, `corral overlay`, `plain overlay`, …; their order alternates between pairs): once, or
 * twice with `VARIABLE` set to `valueA` and to `valueB` (`-` unsets it) in alternating order. Per
 * run it prints the wall ratio to that pair's xargs, the process-tree CPU, the phases, and git's
 * CPU per agent by subcommand (commands per agent and ms, from the scenario's git shim, children of
 * each git command included). Another build is compared by running the same command from its own
 * checkout, alternating.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { readGitLog } from "./lib/gitCpu.ts"
import { workspacesReal } from "./scenarios/workspaces-real.ts"

const [name = "corral", pairsRaw = "3", nRaw = "2", variable, valueA, valueB] = process.argv.slice(2)
const concurrency = Number(nRaw)
/** The scenario's ten folder agents and its check. */
const AGENTS = 11

const bySubcommand = (log: string, agents: number) => {
  const totals = new Map<string, { count: number; ms: number }>()
  for (const command of readGitLog(log)) {
    const entry = totals.get(command.subcommand) ?? { count: 0, ms: 0 }
    entry.count++
    entry.ms += command.cpuMs
    totals.set(command.subcommand, entry)
  }
  return [...totals]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(([subcommand, { count, ms }]) => `${subcommand} ${(count / agents).toFixed(1)}× ${(ms / agents).toFixed(1)}`)
    .join(", ")
}

process.env.TMPDIR = "/dev/shm"
const logs = fs.mkdtempSync("/dev/shm/corral-realprobe-")
process.env.CORRAL_BENCH_GIT_LOGS = logs
process.once("exit", () => fs.rmSync(logs, { recursive: true, force: true }))
const found = (await workspacesReal.cases({ quick: false, reps: 1 })).find((c) => c.params.concurrency === concurrency)
const xargs = workspacesReal.approaches.find((a) => a.name === "xargs -P N")
const approaches = name.split(",").map((row) => workspacesReal.approaches.find((a) => a.name === row))
if (found === undefined || xargs === undefined || approaches.some((a) => a === undefined))
  throw new Error(`no case or row ${name}`)

const context = { signal: new AbortController().signal }

const setVariable = (value: string | undefined) => {
  if (variable === undefined) return
  if (value === "-" || value === undefined) delete process.env[variable]
  else process.env[variable] = value
}

for (let pair = 0; pair < Number(pairsRaw); pair++) {
  const floor = await xargs.run(found.params, context)
  const order = variable === undefined ? [undefined] : pair % 2 === 0 ? [valueA, valueB] : [valueB, valueA]
  const rows = pair % 2 === 0 ? approaches : [...approaches].reverse()
  for (const [value, approach] of order.flatMap((value) => rows.map((row) => [value, row!] as const))) {
    setVariable(value)
    const before = new Set(fs.readdirSync(logs))
    const sample = await approach.run(found.params, context)
    const log = fs.readdirSync(logs).find((file) => !before.has(file))
    const m = sample.metrics ?? {}
    console.log(
      [
        variable === undefined ? approach.name : `${approach.name} ${variable}=${value}`,
        `N=${concurrency}`,
        `wall ${(sample.ms / 1000).toFixed(2)} s (${(sample.ms / floor.ms).toFixed(3)}× xargs)`,
        `CPU ${m.cpuMs} ms (xargs ${floor.metrics?.cpuMs})`,
        `git CPU/agent ${m.gitCpuMsPerAgent?.toFixed(1)} ms`,
        m.setUpMs === undefined
          ? ""
          : `set-up ${m.setUpMs.toFixed(0)} commit ${m.commitMs?.toFixed(0)} merge ${m.mergeMs?.toFixed(0)} ms`,
        `same tree ${m.sameTree}`
      ].join("  ")
    )
    if (log !== undefined) console.log(`  per agent: ${bySubcommand(path.join(logs, log), AGENTS)}`)
  }
}
process.exit(0)
