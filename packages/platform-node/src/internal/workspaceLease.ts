import * as fs from "node:fs/promises"
import * as path from "node:path"
import * as DurationOption from "@corral/core/DurationOption"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { InvalidOption } from "../LeaseTables.ts"
import type { Config, RunLease } from "../Workspace.ts"
import { hostname } from "./workspaceEnv.ts"
import { InvalidWorkspaceId, type WorkspaceError } from "./workspaceErrors.ts"
import { isPidAlive, listDir, processStart, readTextOrUndefined, removePath, writeText } from "./workspaceFs.ts"
import { registryRoot, touchRecords } from "./runRegistry.ts"
import { validateId } from "./workspaceRepo.ts"

export interface LeaseFile {
  readonly pid: number
  readonly hostname: string
  readonly startedAt: number
  readonly heartbeatAt: number
  /** When the process started ({@link processStart}); absent where it cannot be read, and in older leases. */
  readonly processStart?: string | undefined
}

/** `root` is the run registry's folder ({@link registryRoot}). */
export const leasePath = (root: string, runId: string) => path.join(root, "runs", `${runId}.json`)

const parseLease = (text: string | undefined): LeaseFile | undefined => {
  if (text === undefined) return undefined
  try {
    const value = JSON.parse(text) as Partial<LeaseFile>
    return typeof value.pid === "number" && typeof value.hostname === "string"
      ? {
          pid: value.pid,
          hostname: value.hostname,
          startedAt: value.startedAt ?? 0,
          heartbeatAt: value.heartbeatAt ?? 0,
          processStart: typeof value.processStart === "string" ? value.processStart : undefined
        }
      : undefined
  } catch {
    return undefined
  }
}

export const readLease = (root: string, runId: string) =>
  readTextOrUndefined(leasePath(root, runId)).pipe(Effect.map(parseLease))

export const readLeases = (root: string) =>
  listDir(path.join(root, "runs")).pipe(
    Effect.flatMap((entries) =>
      Effect.forEach(
        entries.filter((entry) => entry.name.endsWith(".json")).map((entry) => entry.name.slice(0, -5)),
        (runId) => readLease(root, runId).pipe(Effect.map((lease) => [runId, lease] as const))
      )
    ),
    Effect.map((pairs) => new Map(pairs.filter((pair): pair is readonly [string, LeaseFile] => pair[1] !== undefined)))
  )

/** The lease's process still runs: its pid is alive and, where both are known, started when the lease says. */
const sameProcessAlive = (lease: LeaseFile): boolean => {
  if (!isPidAlive(lease.pid)) return false
  const started = lease.processStart === undefined ? undefined : processStart(lease.pid)
  return started === undefined || started === lease.processStart
}

/**
 * `config` with its lease timing in milliseconds, or a defect naming the setting it cannot use: the
 * port settings are whole numbers from 1 to 65535 and the last block ends at port 65535 at most.
 */
export const checkConfig = (config: Config): Effect.Effect<Config> =>
  Effect.suspend(() => {
    for (const option of ["portBase", "portsPerAgent", "portBlocks"] as const) {
      const value: unknown = config[option]
      if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65_535)
        return invalidSetting(option, `must be a whole number from 1 to 65535, got ${show(value)}`)
    }
    const lastPort = config.portBase + config.portBlocks * config.portsPerAgent - 1
    if (lastPort > 65_535)
      return invalidSetting(
        "portBlocks",
        `${config.portBlocks} blocks of ${config.portsPerAgent} ports from port ${config.portBase} end at port ${lastPort}, above 65535`
      )
    const heartbeat = DurationOption.intervalMillis(config.heartbeat)
    if (Result.isFailure(heartbeat)) return invalidSetting("heartbeat", heartbeat.failure)
    const staleAfter = DurationOption.intervalMillis(config.staleAfter)
    if (Result.isFailure(staleAfter)) return invalidSetting("staleAfter", staleAfter.failure)
    return Effect.succeed({ ...config, heartbeat: heartbeat.success, staleAfter: staleAfter.success })
  })

const show = (value: unknown): string => (typeof value === "number" ? String(value) : String(JSON.stringify(value)))

const invalidSetting = (option: string, reason: string) =>
  Effect.die(new InvalidOption({ module: "Workspace", option, reason }))

export const isLeaseAlive = (lease: LeaseFile | undefined, now: number, staleAfter: Duration.Input): boolean => {
  if (lease === undefined) return false
  if (lease.hostname === hostname()) return sameProcessAlive(lease)
  return now - lease.heartbeatAt < Duration.toMillis(Duration.fromInputUnsafe(staleAfter))
}

const writeLease = (file: string, lease: LeaseFile) => writeText(file, `${JSON.stringify(lease, null, 2)}\n`)

export const registerRun = (
  config: Config,
  repo: string,
  runId: string
): Effect.Effect<RunLease, WorkspaceError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* validateId("runId", runId)
    const root = yield* registryRoot(repo)
    const file = leasePath(root, runId)
    const now = yield* Clock.currentTimeMillis
    if (isLeaseAlive(yield* readLease(root, runId), now, config.staleAfter)) {
      return yield* new InvalidWorkspaceId({ field: "runId", value: runId, reason: `run is already live (${file})` })
    }
    const lease: LeaseFile = {
      pid: process.pid,
      hostname: hostname(),
      startedAt: now,
      heartbeatAt: now,
      processStart: processStart(process.pid)
    }
    yield* Effect.acquireRelease(writeLease(file, lease), () =>
      touchRecords(root, runId).pipe(Effect.andThen(removePath(file)), Effect.ignore)
    )
    const beat = Clock.currentTimeMillis.pipe(
      Effect.flatMap((heartbeatAt) => writeLease(file, { ...lease, heartbeatAt })),
      Effect.ignore,
      Effect.uninterruptible
    )
    yield* Effect.forkScoped(
      beat.pipe(Effect.repeat(Schedule.spaced(config.heartbeat)), Effect.delay(config.heartbeat))
    )
    return { runId, path: file, pid: lease.pid, hostname: lease.hostname, startedAt: lease.startedAt }
  })

export const removeLeaseFile = (root: string, runId: string) =>
  Effect.promise(() => fs.rm(leasePath(root, runId), { force: true }))
