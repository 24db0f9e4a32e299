import * as fsp from "node:fs/promises"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as ChildProcess from "effect/process/ChildProcess"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ProcessLimits, ProcessResult, ProcessSpec } from "../ProcessRunner.ts"
import { ProcessFailed } from "./processError.ts"
import { type Breach, classify, describeEnd, type Ended, type Measured, toMb } from "./processExit.ts"
import { type LogWriter, openLog } from "./processLog.ts"
import { LineCollector, type StreamName } from "./processOutput.ts"
import { childEnv, defaultName, makePlan, type Plan, redactWith, secretValues } from "./processPlan.ts"
import { isGroupAlive, procAvailable, sampleGroup, signalGroup } from "./processWatch.ts"

const SAMPLE_INTERVAL = Duration.millis(100)
const POLL_INTERVAL = Duration.millis(20)

type Handle = ChildProcessSpawner.ChildProcessHandle

const startFailure = (spec: ProcessSpec, name: string, detail: string) =>
  new ProcessFailed({ reason: "spawn", name, command: spec.command, crashed: false, tail: [], durationMs: 0, detail })

const spawn = (
  plan: Plan
): Effect.Effect<Handle, ProcessFailed, ChildProcessSpawner.ChildProcessSpawner | Scope.Scope> =>
  ChildProcess.make(plan.argv[0], plan.argv.slice(1), {
    cwd: plan.cwd,
    env: plan.env,
    extendEnv: false,
    detached: true,
    stdin: "ignore",
    killSignal: "SIGTERM",
    forceKillAfter: Duration.millis(plan.killGraceMs)
  }).pipe(
    Effect.mapError((error) =>
      startFailure({ command: plan.display }, plan.name, redactWith(plan.secrets)(error.message))
    )
  )

const sample = (pid: number, limits: ProcessLimits, measured: Measured): Breach | undefined => {
  const group = sampleGroup(pid)
  if (group === undefined || group.members === 0) return undefined
  measured.peakRssBytes = Math.max(measured.peakRssBytes, group.rssBytes)
  measured.userMs = Math.max(measured.userMs, group.userMs)
  measured.systemMs = Math.max(measured.systemMs, group.systemMs)
  measured.leaderCpuMs = Math.max(measured.leaderCpuMs, group.leaderCpuMs)
  const memoryMb = limits.memoryMb
  return memoryMb !== undefined && group.rssBytes > memoryMb * 1024 * 1024
    ? { limit: "memoryMb" as const, value: memoryMb }
    : undefined
}

const watchdog = (pid: number, limits: ProcessLimits, measured: Measured, breach: Deferred.Deferred<Breach>) =>
  Effect.gen(function* () {
    const over = sample(pid, limits, measured)
    if (over !== undefined) yield* Deferred.succeed(breach, over)
    yield* Effect.sleep(SAMPLE_INTERVAL)
  }).pipe(Effect.forever)

const enforce = (handle: Handle, plan: Plan, breach: Deferred.Deferred<Breach>) =>
  Effect.gen(function* () {
    const { limit } = yield* Deferred.await(breach)
    if (limit === "memoryMb") return signalGroup(handle.pid, "SIGKILL")
    yield* Effect.ignore(handle.kill({ killSignal: "SIGTERM", forceKillAfter: Duration.millis(plan.killGraceMs) }))
  })

const pump = (
  stream: Stream.Stream<Uint8Array, unknown>,
  name: StreamName,
  output: LineCollector,
  log: LogWriter,
  breach: Deferred.Deferred<Breach>,
  limits: ProcessLimits
) =>
  Stream.runForEach(stream, (chunk) =>
    Effect.gen(function* () {
      const text = output.push(name, chunk)
      if (output.overLimit && limits.maxOutputBytes !== undefined) {
        yield* Deferred.succeed(breach, { limit: "maxOutputBytes" as const, value: limits.maxOutputBytes })
      }
      yield* log.write(text)
    })
  ).pipe(Effect.ignore, Effect.andThen(Effect.suspend(() => log.write(output.flush(name)))))

const waitGroupGone = (pgid: number, ms: number) =>
  Effect.gen(function* () {
    for (let waited = 0; waited < ms && isGroupAlive(pgid); waited += 20) yield* Effect.sleep(POLL_INTERVAL)
  })

const reapGroup = (pgid: number, graceMs: number) =>
  Effect.gen(function* () {
    if (!isGroupAlive(pgid)) return
    signalGroup(pgid, "SIGTERM")
    yield* waitGroupGone(pgid, graceMs)
    if (!isGroupAlive(pgid)) return
    signalGroup(pgid, "SIGKILL")
    yield* waitGroupGone(pgid, 1000)
  })

const readResult = (plan: Plan, failed: (detail: string) => ProcessFailed) =>
  plan.resultPath === undefined
    ? Effect.succeed(undefined)
    : Effect.tryPromise({
        try: async () => JSON.parse(await fsp.readFile(plan.resultPath!, "utf8")) as unknown,
        catch: (error) => failed(`${plan.resultPath}: ${error instanceof Error ? error.message : String(error)}`)
      })

const succeed = (ended: Ended, result: unknown): ProcessResult => ({
  exitCode: 0,
  durationMs: ended.durationMs,
  tail: [...ended.output.tail],
  usage: {
    cpuUserMs: ended.measured.userMs,
    cpuSystemMs: ended.measured.systemMs,
    peakRssMb: toMb(ended.measured.peakRssBytes)
  },
  droppedLines: ended.output.dropped,
  ...(ended.plan.logPath === undefined ? {} : { logPath: ended.plan.logPath }),
  ...(result === undefined ? {} : { result })
})

const supervise = Effect.fnUntraced(function* (spec: ProcessSpec, plan: Plan) {
  const limits = spec.limits ?? {}
  const clock = yield* Clock.Clock
  const startedAt = clock.currentTimeMillisUnsafe()
  const log = yield* openLog(plan.logPath).pipe(
    Effect.mapError((error) => startFailure(spec, plan.name, `cannot open log file: ${error.message}`))
  )
  if (limits.memoryMb !== undefined && !procAvailable) {
    yield* Effect.logWarning(`memoryMb limit of process "${plan.name}" is not enforced: /proc is not available`)
  }
  const output = new LineCollector({
    redact: redactWith(plan.secrets),
    onLine: spec.onLine,
    maxOutputBytes: limits.maxOutputBytes,
    logging: plan.logPath !== undefined,
    now: () => clock.currentTimeMillisUnsafe()
  })
  yield* log.write(`[corral] $ ${plan.display}\n`)
  const handle = yield* spawn(plan).pipe(
    Effect.tap((handle) =>
      Effect.addFinalizer(() =>
        Effect.ensuring(
          reapGroup(handle.pid, plan.killGraceMs),
          Effect.sync(() => spec.onProcess?.(undefined))
        )
      )
    ),
    Effect.tap((handle) => Effect.sync(() => spec.onProcess?.(handle.pid))),
    Effect.tap((handle) => Effect.ignore(handle.unref)),
    Effect.uninterruptible
  )
  const breach = yield* Deferred.make<Breach>()
  const measured: Measured = { peakRssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 }
  yield* Effect.forkScoped(watchdog(handle.pid, limits, measured, breach))
  yield* Effect.forkScoped(enforce(handle, plan, breach))
  const pumps = yield* Effect.forkScoped(
    Effect.all(
      [
        pump(handle.stdout, "stdout", output, log, breach, limits),
        pump(handle.stderr, "stderr", output, log, breach, limits)
      ],
      { concurrency: 2, discard: true }
    )
  )
  const exit = yield* Effect.exit(handle.exitCode)
  yield* reapGroup(handle.pid, plan.killGraceMs)
  yield* Fiber.join(pumps).pipe(Effect.timeoutOption(plan.killGraceMs + 1000))
  const ended: Ended = {
    plan,
    limits,
    exit,
    breach: Deferred.isDoneUnsafe(breach) ? yield* Deferred.await(breach) : undefined,
    measured,
    output,
    durationMs: clock.currentTimeMillisUnsafe() - startedAt
  }
  yield* log.write(`[corral] ${describeEnd(ended)} after ${ended.durationMs} ms\n`)
  const failure = classify(ended)
  if (failure !== undefined) return yield* failure
  const result = yield* readResult(plan, (detail) => new ProcessFailed({ ...failureBase(ended), detail }))
  return succeed(ended, result)
})

const failureBase = (ended: Ended) => ({
  reason: "result" as const,
  name: ended.plan.name,
  command: ended.plan.display,
  crashed: false,
  exitCode: 0,
  tail: [...ended.output.tail],
  durationMs: ended.durationMs,
  logPath: ended.plan.logPath
})

export const run = (
  spec: ProcessSpec
): Effect.Effect<ProcessResult, ProcessFailed, ChildProcessSpawner.ChildProcessSpawner> =>
  Effect.suspend(() => {
    const planned = makePlan(spec)
    if (planned._tag === "Invalid") {
      const command = redactWith(secretValues(spec, childEnv(spec)))(spec.command)
      return Effect.fail(startFailure({ ...spec, command }, defaultName(spec), planned.detail))
    }
    return Effect.scoped(supervise(spec, planned.plan))
  })
