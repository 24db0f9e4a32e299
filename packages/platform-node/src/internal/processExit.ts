import * as Exit from "effect/Exit"
import type * as PlatformError from "effect/PlatformError"
import type { ExitCode } from "effect/process/ChildProcessSpawner"
import type { ProcessLimits } from "../ProcessRunner.ts"
import { type LimitName, ProcessFailed } from "./processError.ts"
import type { LineCollector } from "./processOutput.ts"
import type { Plan } from "./processPlan.ts"

export interface Breach {
  readonly limit: LimitName
  readonly value: number
  readonly detail?: string | undefined
}

export interface Measured {
  peakRssBytes: number
  userMs: number
  systemMs: number
  leaderCpuMs: number
}

export interface Ended {
  readonly plan: Plan
  readonly limits: ProcessLimits
  readonly exit: Exit.Exit<ExitCode, PlatformError.PlatformError>
  readonly breach: Breach | undefined
  readonly measured: Measured
  readonly output: LineCollector
  readonly durationMs: number
}

const crashSignals = new Set(["SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGSYS", "SIGTRAP", "SIGKILL"])

export const toMb = (bytes: number): number => Math.round((bytes / (1024 * 1024)) * 10) / 10

export const signalOf = (error: PlatformError.PlatformError): string | undefined => {
  const cause = error.reason.cause
  const text = cause instanceof Error ? cause.message : String(cause)
  return /receipt of signal: '(\w+)'/.exec(text)?.[1]
}

export const describeEnd = (ended: Ended): string => {
  if (Exit.isSuccess(ended.exit)) return `exit code ${ended.exit.value}`
  const failure = ended.exit.cause.reasons.find((r) => r._tag === "Fail")
  const signal = failure === undefined ? undefined : signalOf(failure.error)
  return signal === undefined ? "failed" : `killed by ${signal}`
}

const base = (ended: Ended) => ({
  name: ended.plan.name,
  command: ended.plan.display,
  tail: [...ended.output.tail],
  durationMs: ended.durationMs,
  logPath: ended.plan.logPath,
  peakRssMb: toMb(ended.measured.peakRssBytes)
})

const rlimitBreach = (ended: Ended, signal: string | undefined): Breach | undefined => {
  const { cpuSeconds, fileSizeMb } = ended.limits
  if (signal === "SIGXFSZ" && fileSizeMb !== undefined) return { limit: "fileSizeMb", value: fileSizeMb }
  if (cpuSeconds === undefined) return undefined
  if (signal === "SIGXCPU") return { limit: "cpuSeconds", value: cpuSeconds }
  const nearLimit = ended.measured.leaderCpuMs >= Math.ceil(cpuSeconds) * 1000 - 200
  return signal === "SIGKILL" && nearLimit ? { limit: "cpuSeconds", value: cpuSeconds } : undefined
}

const limitFailure = (ended: Ended, breach: Breach, signal: string | undefined, exitCode: number | undefined) =>
  new ProcessFailed({
    ...base(ended),
    reason: "limit",
    crashed: false,
    limit: breach.limit,
    limitValue: breach.value,
    detail: breach.detail,
    signal,
    exitCode
  })

const SHELL_SIGXCPU = 128 + 24
const SHELL_SIGXFSZ = 128 + 25

const exitCodeBreach = (ended: Ended, code: number): Breach | undefined => {
  const { cpuSeconds, fileSizeMb } = ended.limits
  if (cpuSeconds !== undefined && code === SHELL_SIGXCPU) return { limit: "cpuSeconds", value: cpuSeconds }
  if (fileSizeMb === undefined) return undefined
  const tooLarge = ended.output.tail.some((line) => /EFBIG|file too large/i.test(line))
  return code === SHELL_SIGXFSZ || tooLarge ? { limit: "fileSizeMb", value: fileSizeMb } : undefined
}

export const classify = (ended: Ended): ProcessFailed | undefined => {
  const exit = ended.exit
  if (Exit.isSuccess(exit)) {
    if (ended.breach !== undefined) return limitFailure(ended, ended.breach, undefined, exit.value)
    if (exit.value === 0) return undefined
    const breach = exitCodeBreach(ended, exit.value)
    if (breach !== undefined) return limitFailure(ended, breach, undefined, exit.value)
    return new ProcessFailed({
      ...base(ended),
      reason: "exit",
      crashed: false,
      exitCode: exit.value,
      detail: ended.output.lastLine()
    })
  }
  const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
  const signal = failure === undefined ? undefined : signalOf(failure.error)
  const breach = ended.breach ?? rlimitBreach(ended, signal)
  if (breach !== undefined) return limitFailure(ended, breach, signal, undefined)
  if (signal === undefined) {
    return new ProcessFailed({ ...base(ended), reason: "spawn", crashed: false, detail: String(failure?.error) })
  }
  return new ProcessFailed({
    ...base(ended),
    reason: "signal",
    crashed: crashSignals.has(signal),
    signal,
    detail: ended.output.lastLine()
  })
}
