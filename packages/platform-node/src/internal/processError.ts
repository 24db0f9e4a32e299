import * as Data from "effect/Data"

/**
 * A limit a process can exceed.
 *
 * @since 0.1.0
 * @category models
 */
export type LimitName =
  | "memoryMb"
  | "cpuSeconds"
  | "fileSizeMb"
  | "maxOutputBytes"
  | "diskMb"
  | "maxResultBytes"
  | "maxUsageBytes"

/**
 * Why a process failed: a non-zero `exit`, a `signal`, a `limit`, a `spawn` problem (bad command or cwd),
 * or a missing or invalid `result` file.
 *
 * @since 0.1.0
 * @category models
 */
export type FailureReason = "exit" | "signal" | "limit" | "spawn" | "result"

/**
 * A process run by `ProcessRunner.run` failed. `crashed` is true when the process died from a signal that
 * points at a crash (SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGTRAP, or SIGKILL from outside,
 * e.g. the kernel OOM killer). `tail` holds the last output lines, with secrets redacted.
 *
 * @example
 * ```ts
 * import { ProcessRunner } from "@corral/platform-node"
 * import { Effect } from "effect"
 *
 * ProcessRunner.run({ command: "make" }).pipe(
 *   Effect.catchTag("ProcessFailed", (e) => Effect.succeed(e.reason === "limit" ? e.limit : e.exitCode))
 * )
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ProcessFailed extends Data.TaggedError("ProcessFailed")<{
  readonly reason: FailureReason
  readonly name: string
  readonly command: string
  readonly crashed: boolean
  readonly tail: ReadonlyArray<string>
  readonly durationMs: number
  readonly exitCode?: number | undefined
  readonly signal?: string | undefined
  readonly limit?: LimitName | undefined
  readonly limitValue?: number | undefined
  readonly peakRssMb?: number | undefined
  readonly detail?: string | undefined
  readonly logPath?: string | undefined
}> {
  override get message(): string {
    return describe(this)
  }
}

const describe = (e: ProcessFailed): string => {
  const head = `process ${JSON.stringify(e.name)}`
  switch (e.reason) {
    case "exit":
      return `${head} exited with code ${e.exitCode}${lastLine(e.detail)}`
    case "signal":
      return `${head} was killed by ${e.signal}${e.crashed ? " (crashed)" : ""}${lastLine(e.detail)}`
    case "limit":
      return `${head} exceeded its ${describeLimit(e)}`
    case "spawn":
      return `${head} could not be started: ${e.detail}`
    case "result":
      return `${head} did not produce a valid result file: ${e.detail}`
  }
}

const lastLine = (line: string | undefined): string => (line === undefined || line === "" ? "" : `: ${line}`)

const describeLimit = (e: ProcessFailed): string => {
  const by = e.signal === undefined ? "" : `, killed by ${e.signal}`
  switch (e.limit) {
    case "memoryMb":
      return `memory limit (${e.limitValue} MB, peak ${e.peakRssMb} MB)`
    case "cpuSeconds":
      return `CPU time limit (${e.limitValue} s${by})`
    case "fileSizeMb":
      return `file size limit (${e.limitValue} MB${by})`
    case "maxOutputBytes":
      return `output limit (${e.limitValue} bytes)`
    case "diskMb":
      return `disk limit (${e.limitValue} MB${e.detail === undefined ? "" : `, ${e.detail}`})`
    case "maxResultBytes":
      return `result size limit (${e.limitValue} bytes)${lastLine(e.detail)}`
    case "maxUsageBytes":
      return `usage file limit (${e.limitValue} bytes)${lastLine(e.detail)}`
    default:
      return "limits"
  }
}
