/**
 * The checks of a process spec's `limits` and `killGrace` given through the library (a plan file's
 * schema checks the same for the command): a value the runner cannot enforce as written (a
 * negative memory limit, a `cpuPercent` given as a string) is refused, naming the field, before
 * anything starts, instead of being ignored or read as something else.
 */
import * as DurationOption from "@corral/core/DurationOption"
import type * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import type { ProcessLimits } from "../ProcessRunner.ts"

type Range = readonly [minimum: number, maximum: number]

const atLeastOne: Range = [1, Number.MAX_SAFE_INTEGER]

const ranges: Readonly<Record<keyof ProcessLimits, Range>> = {
  memoryMb: atLeastOne,
  cpuSeconds: atLeastOne,
  fileSizeMb: atLeastOne,
  maxProcesses: atLeastOne,
  nice: [-20, 19],
  maxOutputBytes: atLeastOne,
  maxResultBytes: atLeastOne,
  maxUsageBytes: atLeastOne,
  cpuPercent: [1, 100],
  diskMb: atLeastOne
}

const expected = ([minimum, maximum]: Range): string =>
  maximum === Number.MAX_SAFE_INTEGER
    ? `a whole number of at least ${minimum}`
    : `a whole number from ${minimum} to ${maximum}`

/** The first limit the runner cannot enforce as written, as `limits.<field>: ...`, else `undefined`. */
export const limitsProblem = (limits: ProcessLimits): string | undefined => {
  for (const [field, range] of Object.entries(ranges) as Array<[keyof ProcessLimits, Range]>) {
    const value: unknown = limits[field]
    if (value === undefined) continue
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < range[0] || value > range[1])
      return `limits.${field}: must be ${expected(range)}, got ${show(value)}`
  }
  return undefined
}

/** `killGrace` in milliseconds, or why it cannot be one. */
export const killGraceMillis = (input: Duration.Input | undefined, fallback: number): number | string => {
  if (input === undefined) return fallback
  const ms = DurationOption.millis(input)
  return Result.isFailure(ms) ? `killGrace: ${ms.failure}` : ms.success
}

/** A limit as an error message shows it: numbers as written, the rest as JSON. */
const show = (value: unknown): string =>
  typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value))
