import * as fs from "node:fs"
import * as path from "node:path"
import type { ProcessLimits, ProcessSpec } from "../ProcessRunner.ts"
import type { Bridge } from "./sandboxBridge.ts"
import { sandboxed } from "./sandboxPlan.ts"
import { isExecutable } from "./executable.ts"
import { killGraceMillis, limitsProblem } from "./processOptions.ts"

export interface Plan {
  readonly name: string
  readonly display: string
  readonly argv: readonly [string, ...Array<string>]
  readonly cwd: string
  readonly env: Record<string, string>
  readonly secrets: ReadonlyArray<string>
  readonly logPath: string | undefined
  readonly resultPath: string | undefined
  readonly killGraceMs: number
  /** Limits that cannot be applied on this machine, to log when the process starts. */
  readonly warnings: ReadonlyArray<string>
  readonly bridge: Bridge | undefined
  /** `CORRAL_PROCESS_TOKEN=<uuid>`: in the environment of the process and everything it starts. */
  readonly token: string
}

export interface Tools {
  readonly prlimit: string | undefined
  readonly nice: string | undefined
}

const inheritable = /^(PATH|HOME|LANG|LANGUAGE|LC_\w+|TERM|USER|LOGNAME|SHELL|TMPDIR|TZ|NODE_\w+)$/

export const childEnv = (spec: ProcessSpec): Record<string, string> => {
  const env: Record<string, string> = {}
  const parent = process.env
  // Read only the values that are passed on: each read of `process.env` is a native call. The names
  // come from `getOwnPropertyNames`: `Object.keys` also asks the environment whether each name is
  // enumerable, a `getenv` per name (≈ 7 against 4.3 µs with 35 variables, 45 against 18 with 135).
  for (const key of Object.getOwnPropertyNames(parent)) {
    if (spec.inheritEnv !== true && !inheritable.test(key)) continue
    const value = parent[key]
    if (value !== undefined) env[key] = value
  }
  for (const name of spec.secrets ?? []) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  return spec.env === undefined ? env : { ...env, ...spec.env }
}

export const secretValues = (spec: ProcessSpec, env: Record<string, string>): ReadonlyArray<string> =>
  (spec.secrets ?? [])
    .map((name) => env[name] ?? "")
    .filter((value) => value.length > 0)
    .sort((a, b) => b.length - a.length)

export const redactWith =
  (secrets: ReadonlyArray<string>) =>
  (text: string): string => {
    let out = text
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join("***")
    return out
  }

const isDirectory = (dir: string): boolean => {
  try {
    return fs.statSync(dir).isDirectory()
  } catch {
    return false
  }
}

/**
 * Commands found on a PATH, by PATH and command, for a second (`FOUND_TTL_MS`), like a shell's command
 * hash: a walk of PATH is a `stat` per entry before the one holding the command (10 for `true` here,
 * ≈ 15 µs of CPU per process), a hit is one check that the file found is still there. So for a second
 * a command added to an earlier PATH entry is not seen; a found file that is gone is looked up again. Misses and PATHs
 * with relative entries (found relative to the current directory) are not kept.
 */
const found = new Map<string, { readonly file: string; readonly at: number }>()
const FOUND_TTL_MS = 1000
const FOUND_MAX = 256

const walkPath = (command: string, searchPath: string): { file: string | undefined; keep: boolean } => {
  let keep = true
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === "") continue
    if (!path.isAbsolute(dir)) keep = false
    const file = path.join(dir, command)
    if (isExecutable(file)) return { file, keep }
  }
  return { file: undefined, keep: false }
}

export const findExecutable = (command: string, searchPath: string | undefined, cwd: string): string | undefined => {
  if (command.includes("/")) {
    const file = path.resolve(cwd, command)
    return isExecutable(file) ? file : undefined
  }
  const key = `${command}\0${searchPath ?? ""}`
  const now = performance.now()
  const hit = found.get(key)
  if (hit !== undefined && now - hit.at < FOUND_TTL_MS && fs.existsSync(hit.file)) return hit.file
  const { file, keep } = walkPath(command, searchPath ?? "")
  if (file === undefined || !keep) {
    found.delete(key)
    return file
  }
  if (found.size >= FOUND_MAX) found.clear()
  found.set(key, { file, at: now })
  return file
}

let cachedTools: Tools | undefined
export const systemTools = (): Tools =>
  (cachedTools ??= {
    prlimit: findExecutable("prlimit", process.env.PATH, "/"),
    nice: findExecutable("nice", process.env.PATH, "/")
  })

const hasRlimits = (limits: ProcessLimits): boolean =>
  limits.cpuSeconds !== undefined || limits.fileSizeMb !== undefined || limits.maxProcesses !== undefined

const prlimitArgs = (limits: ProcessLimits): Array<string> => {
  const args: Array<string> = []
  if (limits.cpuSeconds !== undefined) {
    const soft = Math.max(1, Math.ceil(limits.cpuSeconds))
    args.push(`--cpu=${soft}:${soft + 1}`)
  }
  if (limits.fileSizeMb !== undefined) args.push(`--fsize=${Math.ceil(limits.fileSizeMb * 1024 * 1024)}`)
  if (limits.maxProcesses !== undefined) args.push(`--nproc=${limits.maxProcesses}`)
  return args
}

const ulimitScript = (limits: ProcessLimits): string => {
  const steps: Array<string> = []
  if (limits.cpuSeconds !== undefined) {
    const soft = Math.max(1, Math.ceil(limits.cpuSeconds))
    steps.push(`ulimit -S -t ${soft}`, `ulimit -H -t ${soft + 1}`)
  }
  if (limits.fileSizeMb !== undefined) steps.push(`ulimit -f ${Math.ceil(limits.fileSizeMb * 2048)}`)
  if (limits.maxProcesses !== undefined) {
    steps.push(`{ ulimit -u ${limits.maxProcesses} 2>/dev/null || ulimit -p ${limits.maxProcesses}; }`)
  }
  return [...steps, `exec "$@"`].join(" && ")
}

export const wrapArgv = (
  base: readonly [string, ...Array<string>],
  limits: ProcessLimits,
  tools: Tools
): readonly [string, ...Array<string>] => {
  const niced: readonly [string, ...Array<string>] =
    limits.nice !== undefined && tools.nice !== undefined ? [tools.nice, "-n", String(limits.nice), ...base] : base
  if (!hasRlimits(limits)) return niced
  if (tools.prlimit !== undefined) return [tools.prlimit, ...prlimitArgs(limits), "--", ...niced]
  return ["/bin/sh", "-c", ulimitScript(limits), "corral-limits", ...niced]
}

/** A shell command is shown as written (a YAML `run: |` block loses only its trailing newline). */
const displayOf = (spec: ProcessSpec): string =>
  spec.shell === true && (spec.args ?? []).length === 0
    ? spec.command.replace(/\s+$/, "")
    : [spec.command, ...(spec.args ?? [])].map(quote).join(" ")

const limitWarnings = (name: string, limits: ProcessLimits, tools: Tools): ReadonlyArray<string> =>
  limits.nice !== undefined && tools.nice === undefined
    ? [`nice limit of process "${name}" is not applied: no \`nice\` executable on PATH`]
    : []

const quote = (word: string): string => (/^[\w@%+=:,./-]+$/.test(word) ? word : JSON.stringify(word))

const safeFileName = (name: string): string => name.replace(/[^\w.-]+/g, "_").slice(0, 120) || "process"

export const defaultName = (spec: ProcessSpec): string =>
  spec.name ?? (spec.shell === true ? "sh" : path.basename(spec.command))

/** The default `killGrace`, 2 seconds (a number, so that a run does not parse a duration string). */
const DEFAULT_KILL_GRACE_MS = 2000

export type PlanResult =
  | { readonly _tag: "Plan"; readonly plan: Plan }
  | { readonly _tag: "Invalid"; readonly detail: string }

export const makePlan = (spec: ProcessSpec, tools: Tools = systemTools()): PlanResult => {
  const problem = limitsProblem(spec.limits ?? {})
  if (problem !== undefined) return { _tag: "Invalid", detail: problem }
  const killGraceMs = killGraceMillis(spec.killGrace, DEFAULT_KILL_GRACE_MS)
  if (typeof killGraceMs === "string") return { _tag: "Invalid", detail: killGraceMs }
  const cwd = path.resolve(spec.cwd ?? process.cwd())
  if (!isDirectory(cwd)) return { _tag: "Invalid", detail: `working directory does not exist: ${cwd}` }
  const env = childEnv(spec)
  const secrets = secretValues(spec, env)
  const executable = spec.shell === true ? "/bin/sh" : findExecutable(spec.command, env.PATH, cwd)
  if (executable === undefined) return { _tag: "Invalid", detail: `command not found: ${spec.command}` }
  const base: readonly [string, ...Array<string>] =
    spec.shell === true ? [executable, "-c", spec.command] : [executable, ...(spec.args ?? [])]
  const name = defaultName(spec)
  const sandbox = sandboxed(spec, cwd, env, wrapArgv(base, spec.limits ?? {}, tools))
  if (typeof sandbox === "string") return { _tag: "Invalid", detail: sandbox }
  const id = crypto.randomUUID()
  const plan: Plan = {
    name,
    display: redactWith(secrets)(displayOf(spec)),
    argv: sandbox.argv,
    bridge: sandbox.bridge,
    cwd,
    env: { ...env, CORRAL_PROCESS_TOKEN: id },
    token: `CORRAL_PROCESS_TOKEN=${id}`,
    secrets,
    logPath: spec.logDir === undefined ? undefined : path.resolve(cwd, spec.logDir, `${safeFileName(name)}.log`),
    resultPath: spec.resultFile === undefined ? undefined : path.resolve(cwd, spec.resultFile),
    killGraceMs,
    warnings: limitWarnings(name, spec.limits ?? {}, tools)
  }
  return { _tag: "Plan", plan }
}
