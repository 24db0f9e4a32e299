import * as os from "node:os"
import { spawnSync } from "node:child_process"
import { type Args, parseArgs } from "./args.ts"
import { printReport, runScenario } from "./harness.ts"
import { hasGc } from "./lib/heap.ts"
import { describeMachine } from "./machine.ts"
import { writeBenchmarks } from "./markdown.ts"
import { registry } from "./registry.ts"
import type { SuiteOptions } from "./types.ts"

const usage = (names: ReadonlyArray<string>): string =>
  [
    "usage: pnpm bench [scenario...] [--reps N] [--quick]",
    `scenarios: ${names.join(", ")}`,
    "  --reps N   repetitions per case (default 5; scheduling at 1M and ratelimit: 3)",
    "  --quick    smaller sizes (scheduling up to 100k) and at most 3 repetitions",
    "A full run (no scenario named, no --quick) rewrites BENCHMARKS.md; `pnpm bench:md` does so from saved results."
  ].join("\n")

const respawnWithGc = (): never => {
  const flags = ["--expose-gc", "--max-old-space-size=8192", ...process.execArgv]
  const child = spawnSync(process.execPath, [...flags, import.meta.filename, ...process.argv.slice(2)], {
    stdio: "inherit"
  })
  process.exit(child.status ?? 1)
}

const selected = (args: Args): ReadonlyArray<string> => {
  const names = registry.map((entry) => entry.name)
  const unknown = args.scenarios.filter((name) => !names.includes(name))
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(", ")}\n${usage(names)}`)
  return args.scenarios.length > 0 ? args.scenarios : names
}

const runOne = async (name: string, options: SuiteOptions): Promise<void> => {
  const started = Date.now()
  const loadStart = os.loadavg()[0]
  const loaded = await registry.find((entry) => entry.name === name)!.load(options)
  if (typeof loaded === "string") console.log(`\n=== ${name} ===\n${loaded}`)
  else if ("text" in loaded) await printReport(loaded, Date.now() - started, loadStart)
  else await runScenario(loaded, options)
}

const main = async (): Promise<void> => {
  const args = parseArgs(process.argv.slice(2))
  if (args.help) return console.log(usage(registry.map((entry) => entry.name)))
  const names = selected(args)
  const options = { quick: args.quick, reps: args.reps }
  console.log(`corral bench — ${describeMachine()}${args.quick ? " — quick" : ""}`)
  const started = Date.now()
  for (const name of names) await runOne(name, options)
  console.log(`\nall done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  if (args.scenarios.length === 0 && !args.quick) console.log(`wrote ${writeBenchmarks()}`)
}

if (!hasGc()) respawnWithGc()
main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
