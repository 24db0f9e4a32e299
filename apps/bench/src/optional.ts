import { recordsTable } from "./format.ts"
import type { Report, Scenario, SuiteOptions, Verdict } from "./types.ts"

const isScenario = (value: unknown): value is Scenario =>
  typeof value === "object" &&
  value !== null &&
  "approaches" in value &&
  "cases" in value &&
  typeof (value as { cases: unknown }).cases === "function"

const runners = (mod: Record<string, unknown>, name: string): Array<unknown> =>
  [mod[name], mod.default, mod.run, mod.main, mod.bench, mod.scenario, ...Object.values(mod)].filter(
    (value) => value !== undefined
  )

const missing = (error: unknown, file: URL): boolean =>
  error instanceof Error &&
  (error as { code?: string }).code === "ERR_MODULE_NOT_FOUND" &&
  error.message.includes(file.pathname)

const fromModule = async (mod: Record<string, unknown>, name: string, options: SuiteOptions) => {
  const candidates = runners(mod, name)
  const scenario = candidates.find(isScenario)
  if (scenario) return scenario
  const fn = candidates.find((value) => typeof value === "function") as ((options: SuiteOptions) => unknown) | undefined
  if (!fn) return `${name}: the module exports neither a Scenario nor a function`
  const out = await fn(options)
  return isScenario(out) ? out : report(name, out)
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isVerdict = (value: unknown): value is Verdict =>
  isRecord(value) && typeof value.target === "string" && typeof value.figure === "string"

const report = (name: string, out: unknown): Report => {
  if (isRecord(out) && typeof out.text === "string" && Array.isArray(out.targets) && out.targets.every(isVerdict))
    return { name, text: out.text, data: out.data ?? null, targets: out.targets }
  if (Array.isArray(out) && out.length > 0 && out.every(isRecord)) return { name, text: recordsTable(out), data: out }
  if (typeof out === "string") return { name, text: out, data: out }
  return { name, text: `${name}: ${JSON.stringify(out) ?? "done"}`, data: out ?? null }
}

export const optionalScenario = async (name: string, options: SuiteOptions): Promise<Scenario | Report | string> => {
  const file = new URL(`./scenarios/${name}.ts`, import.meta.url)
  let mod: Record<string, unknown>
  try {
    mod = await import(file.href)
  } catch (error) {
    if (missing(error, file)) return "not yet implemented"
    return `failed to load ${name}: ${error instanceof Error ? error.message : String(error)}`
  }
  try {
    return await fromModule(mod, name, options)
  } catch (error) {
    return `${name} failed: ${error instanceof Error ? error.message : String(error)}`
  }
}
