import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as ChildProcess from "effect/process/ChildProcess"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import * as Scope from "effect/Scope"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type { ProcessLimits, ProcessResult, ProcessSpec } from "../ProcessRunner.ts"
import { ProcessFailed } from "./processError.ts"
import { type Breach, classify, describeEnd, type Ended, type Measured, toMb } from "./processExit.ts"
import { finalDiskCheck, guards } from "./processGuards.ts"
import { type LogWriter, openLog } from "./processLog.ts"
import { LineCollector, type StreamName } from "./processOutput.ts"
import { childEnv, defaultName, makePlan, type Plan, redactWith, secretValues } from "./processPlan.ts"
import * as Protocol from "./processProtocol.ts"
import { type UsageLimit, UsageTail } from "./processUsage.ts"
import * as Sampler from "./processSampler.ts"
import * as ParentWatchdog from "./parentWatchdog.ts"
import { openBridge } from "./sandboxBridge.ts"
import { type OutputChunk, type Started, spawnThroughHelper } from "./processSpawn.ts"
import { sandboxOptions } from "./sandboxPlan.ts"
import {
  type GroupSample,
  isGroupAlive,
  launchedLeader,
  type ProcEntry,
  procAvailable,
  sampleGroup,
  signalGroup,
  signalStray,
  Strays
} from "./processWatch.ts"

const POLL_INTERVAL = Duration.millis(20)

const startFailure = (spec: ProcessSpec, name: string, detail: string) =>
  new ProcessFailed({ reason: "spawn", name, command: spec.command, crashed: false, tail: [], durationMs: 0, detail })

/**
 * Keeps Node running while corral waits for a process it started itself (the spawn helper's pipes
 * do that for the processes the helper starts). Such a process is unreferenced right after the spawn (`handle.unref`: with a referenced handle, effect's
 * spawner would also terminate the group when the scope closes, besides `reapTree`, with its own
 * grace), and then nothing of it keeps the event loop alive once its output pipes have closed: a
 * script whose only work is awaiting the run would end before the process had exited. A referenced
 * timer does, until the run's scope closes.
 */
const keepAlive = Effect.acquireRelease(
  Effect.sync(() => setInterval(() => undefined, 2 ** 30)),
  (timer) => Effect.sync(() => clearInterval(timer))
)

/**
 * Starts the plan's process: through the spawn helper once it is ready (no fork of this process),
 * else with effect's spawner. Either way the leader of a new process group and session.
 */
const spawn = (
  plan: Plan
): Effect.Effect<Started, ProcessFailed, ChildProcessSpawner.ChildProcessSpawner | Scope.Scope> =>
  spawnThroughHelper(plan, (detail) =>
    startFailure({ command: plan.display }, plan.name, redactWith(plan.secrets)(detail))
  ) ??
  ChildProcess.make(plan.argv[0], plan.argv.slice(1), {
    // `makePlan` checked the directory; the spawner would check it again, asynchronously, for every run.
    // Without `cwd` the child starts in ours, so leave it out when that is the same directory.
    ...(plan.cwd === process.cwd() ? {} : { cwd: plan.cwd }),
    env: plan.env,
    extendEnv: false,
    detached: true,
    stdin: "ignore",
    killSignal: "SIGTERM",
    forceKillAfter: Duration.millis(plan.killGraceMs)
  }).pipe(
    Effect.map(
      (handle): Started => ({
        pid: handle.pid,
        output: { _tag: "Streams", stdout: handle.stdout, stderr: handle.stderr },
        exitCode: handle.exitCode,
        unref: Effect.andThen(handle.unref, keepAlive),
        // Effect's spawner lets go of its handle in finalizers of its own.
        release: () => undefined
      })
    ),
    Effect.mapError((error) =>
      startFailure({ command: plan.display }, plan.name, redactWith(plan.secrets)(error.message))
    )
  )

/** A watchdog that kills the command's processes once process `parent` is gone, stopped with the run's scope. */
const startGuard = (spec: ProcessSpec, plan: Plan, parent: number) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => ParentWatchdog.start(ParentWatchdog.watched(parent), plan.token),
      catch: (error) => startFailure(spec, plan.name, (error as Error).message)
    }),
    (guard) => Effect.sync(guard.stop)
  )

/** Mutable state shared by the watchdog, the output pumps and the supervisor of one process. */
interface Watch {
  readonly measured: Measured
  /** The first exceeded limit; only the first one is enforced and reported. */
  breach: Breach | undefined
  /** Set once the process group has been seen empty: it cannot come back, so there is nothing left to reap. */
  gone: boolean
  /** Processes of the tree that left the group; set once the process has started. */
  strays: Strays | undefined
  /** Set once the group is gone and no stray was found. */
  treeGone: boolean
}

const record = (group: GroupSample | undefined, limits: ProcessLimits, measured: Measured): Breach | undefined => {
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

/** The usage file is read at every third sample (every 300 ms) while the process runs. */
const USAGE_EVERY_SAMPLES = 3

/**
 * Samples the group at the instants of the shared sampler (`processSampler.ts`: the first at least
 * 50 ms after the start, then every 100 ms, after the first 2 seconds every 500 ms unless a memory
 * limit is set; a scan reads the `stat` of every process of the machine, ≈ 2.4 ms of CPU among ≈ 100
 * processes, shared by the processes sampled within 40 ms). Nothing is read at the start: the first
 * read of a process's /proc entry costs ≈ 40 µs of CPU right after its `exec` (against ≈ 8 later), and
 * a process shorter than one sample shows roughly zero usage either way. It reads what the process
 * appended to its usage file at every third sample while sampling every 100 ms (every 300 ms), at
 * every sample after that, in a fiber of its own with `context` when the file grew (a read is not
 * interrupted halfway). A memory breach kills the group at once. `stop` ends the sampling and waits
 * for a usage read under way.
 */
const watchdog = (
  pid: number,
  limits: ProcessLimits,
  watch: Watch,
  usage: UsageTail,
  context: Context.Context<never>
): Effect.Effect<void> => {
  const check = (group: GroupSample | undefined) => {
    const over = record(group, limits, watch.measured)
    if (over !== undefined && watch.breach === undefined) {
      watch.breach = over
      signalGroup(pid, "SIGKILL")
    }
  }
  let reading: Fiber.Fiber<void> | undefined
  const entry = Sampler.add(limits.memoryMb !== undefined, (sample, period) => {
    check(sampleGroup(pid))
    watch.strays?.track()
    if (period === Sampler.SAMPLE_MS && sample % USAGE_EVERY_SAMPLES !== 0) return
    if (reading !== undefined && reading.pollUnsafe() === undefined) return
    if (usage.grew()) reading = Effect.runForkWith(context)(Effect.uninterruptible(usage.read(false)))
  })
  return Effect.suspend(() => {
    Sampler.remove(entry)
    return reading === undefined ? Effect.void : Fiber.join(reading)
  })
}

/** Records the first breach and kills the group at once. */
const breachOnce = (pid: number, watch: Watch, breach: Breach) => {
  if (watch.breach !== undefined) return
  watch.breach = breach
  signalGroup(pid, "SIGKILL")
}

/**
 * The usage file's bound: a larger file fails the run with the limit and gets the group SIGKILL,
 * unless the group is known gone (the last read comes after it was reaped).
 */
const usageLimit = (pid: number, limits: ProcessLimits, file: string, watch: Watch): UsageLimit | undefined => {
  const maxBytes = limits.maxUsageBytes
  if (maxBytes === undefined) return undefined
  const breach: Breach = { limit: "maxUsageBytes", value: maxBytes }
  return {
    maxBytes,
    onOverLimit: (size) => {
      if (watch.gone) watch.breach ??= { ...breach, detail: `${file} is ${size} bytes` }
      else breachOnce(pid, watch, { ...breach, detail: `${file} is ${size} bytes` })
    }
  }
}

/** Stops capturing and terminates the group (SIGTERM, SIGKILL after the grace period) in a fiber of the run's scope. */
const enforceOutputLimit = (pid: number, plan: Plan, watch: Watch, value: number, scope: Scope.Scope) => {
  if (watch.breach !== undefined) return Effect.void
  watch.breach = { limit: "maxOutputBytes", value }
  return Effect.asVoid(Effect.forkIn(terminateGroup(pid, plan.killGraceMs), scope))
}

const pump = (
  stream: Stream.Stream<Uint8Array, unknown>,
  name: StreamName,
  output: LineCollector,
  log: LogWriter,
  onOverLimit: () => Effect.Effect<void>
) =>
  Stream.runForEachArray(stream, (chunks) => {
    let text = ""
    for (const chunk of chunks) text += output.push(name, chunk)
    return output.overLimit ? Effect.andThen(onOverLimit(), log.write(text)) : log.write(text)
  }).pipe(Effect.ignore, Effect.andThen(Effect.suspend(() => log.write(output.flush(name)))))

/** A reader of a process's output: whether it is done, and a callback once it is (returns its remover). */
interface Reader {
  readonly done: () => boolean
  readonly onDone: (callback: () => void) => () => void
}

const fiberReader = (fiber: Fiber.Fiber<void>): Reader => ({
  done: () => fiber.pollUnsafe() !== undefined,
  onDone: (callback) => fiber.addObserver(callback)
})

/**
 * Reads both outputs of a process started through the helper, in the order the helper read them.
 * Without a log file, in the helper's callbacks, with no fiber (the lines go to the collector, which
 * calls `onLine`; a breach of `maxOutputBytes` forks the termination with `context`); with one, a
 * fiber takes them batch by batch from a queue and writes each batch's log text before taking the
 * next. Either way each chunk is reported consumed as it is taken (as effect's streams pull it).
 */
const readChunks = (
  out: Extract<Started["output"], { _tag: "Chunks" }>,
  output: LineCollector,
  log: LogWriter,
  logging: boolean,
  onOverLimit: () => Effect.Effect<void>,
  context: Context.Context<never>
): Effect.Effect<Reader, never, Scope.Scope> => {
  if (!logging) {
    return Effect.sync(() => {
      let done = false
      let limited = false
      const waiting = new Set<() => void>()
      out.listen({
        data: (fd, bytes) => {
          output.push(fd === 1 ? "stdout" : "stderr", bytes)
          out.consumed(bytes.length)
          if (!output.overLimit || limited) return
          limited = true
          Effect.runForkWith(context)(onOverLimit())
        },
        end: () => {
          output.flush("stdout")
          output.flush("stderr")
          done = true
          for (const callback of waiting) callback()
          waiting.clear()
        }
      })
      return {
        done: () => done,
        onDone: (callback) => {
          waiting.add(callback)
          return () => waiting.delete(callback)
        }
      }
    })
  }
  return Effect.flatMap(Queue.unbounded<OutputChunk, Cause.Done>(), (chunks) => {
    out.listen({
      data: (fd, bytes) => Queue.offerUnsafe(chunks, { fd, bytes }),
      end: () => Queue.endUnsafe(chunks)
    })
    const flush = Effect.suspend(() => log.write(output.flush("stdout") + output.flush("stderr")))
    const loop: Effect.Effect<void> = Effect.flatMap(Effect.exit(Queue.takeAll(chunks)), (taken) => {
      if (taken._tag === "Failure") return flush
      let text = ""
      let bytes = 0
      for (const chunk of taken.value) {
        bytes += chunk.bytes.length
        text += output.push(chunk.fd === 1 ? "stdout" : "stderr", chunk.bytes)
      }
      out.consumed(bytes)
      const written = output.overLimit ? Effect.andThen(onOverLimit(), log.write(text)) : log.write(text)
      return Effect.andThen(written, loop)
    })
    return Effect.map(Effect.forkScoped(loop), fiberReader)
  })
}

/** The readers of the process's output: fibers forked in the run's scope, or the helper's callbacks. */
const readers = (
  started: Started,
  output: LineCollector,
  log: LogWriter,
  logging: boolean,
  onOverLimit: () => Effect.Effect<void>,
  context: Context.Context<never>
): Effect.Effect<ReadonlyArray<Reader>, never, Scope.Scope> => {
  const out = started.output
  return out._tag === "Chunks"
    ? Effect.map(readChunks(out, output, log, logging, onOverLimit, context), (reader) => [reader])
    : Effect.map(
        Effect.all([
          Effect.forkScoped(pump(out.stdout, "stdout", output, log, onOverLimit)),
          Effect.forkScoped(pump(out.stderr, "stderr", output, log, onOverLimit))
        ]),
        (fibers) => fibers.map(fiberReader)
      )
}

/** node's longest timer: a longer one (`killGrace: Infinity`) fires after 1 ms, with a warning. */
const maxTimerMs = 2_147_483_647

/** Waits until every reader is done, or `ms` passed; without a timer when they are done already. */
const awaitDone = (readers: ReadonlyArray<Reader>, ms: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const running = readers.filter((reader) => !reader.done())
    if (running.length === 0) return resume(Effect.void)
    let pending = running.length
    let timer: ReturnType<typeof setTimeout> | undefined
    const removers: Array<() => void> = []
    const stop = () => {
      clearTimeout(timer)
      for (const remove of removers) remove()
    }
    const finish = () => {
      stop()
      resume(Effect.void)
    }
    for (const reader of running) {
      removers.push(
        reader.onDone(() => {
          pending -= 1
          if (pending === 0) finish()
        })
      )
    }
    if (pending === 0) return
    timer = setTimeout(finish, Math.min(ms, maxTimerMs))
    return Effect.sync(stop)
  })

const waitGroupGone = (pgid: number, ms: number) =>
  Effect.gen(function* () {
    for (let waited = 0; waited < ms && isGroupAlive(pgid); waited += 20) yield* Effect.sleep(POLL_INTERVAL)
  })

const terminateGroup = (pgid: number, graceMs: number) =>
  Effect.gen(function* () {
    signalGroup(pgid, "SIGTERM")
    yield* waitGroupGone(pgid, graceMs)
    if (!isGroupAlive(pgid)) return
    signalGroup(pgid, "SIGKILL")
    yield* waitGroupGone(pgid, 1000)
  })

/** Terminates what is left of the group: SIGTERM, SIGKILL after `graceMs`. Free when the group is gone. */
const reapGroup = (pgid: number, graceMs: number, watch: Watch): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (watch.gone || !isGroupAlive(pgid)) {
      watch.gone = true
      return Effect.void
    }
    return Effect.andThen(
      terminateGroup(pgid, graceMs),
      Effect.sync(() => {
        watch.gone = !isGroupAlive(pgid)
      })
    )
  })

/**
 * Sends `signal` to the strays `found`, then, every 20 ms for up to `ms`, to those a new scan finds
 * (once each), until none is left and none is unsettled (`Strays.unsettled`: one caught in an `exec`
 * is found once the exec is done).
 */
const signalStrays = (strays: Strays, found: ReadonlyArray<ProcEntry>, signal: NodeJS.Signals, ms: number) =>
  Effect.gen(function* () {
    const signalled = new Set<number>()
    for (let waited = 0; found.length > 0 || strays.unsettled > 0; waited += 20) {
      for (const entry of found) {
        if (signalled.has(entry.pid)) continue
        signalled.add(entry.pid)
        signalStray(entry, signal)
      }
      if (waited >= ms) return
      yield* Effect.sleep(POLL_INTERVAL)
      found = strays.collect()
    }
  })

/** Terminates the processes of the tree that left its group: SIGTERM, SIGKILL after `graceMs`. */
const reapStrays = (graceMs: number, watch: Watch): Effect.Effect<void> =>
  Effect.suspend(() => {
    const strays = watch.strays
    if (strays === undefined || watch.treeGone) return Effect.void
    const found = strays.collect()
    if (found.length === 0 && strays.unsettled === 0) {
      watch.treeGone = watch.gone
      return Effect.void
    }
    return Effect.gen(function* () {
      yield* signalStrays(strays, found, "SIGTERM", graceMs)
      yield* signalStrays(strays, strays.collect(), "SIGKILL", 1000)
    })
  })

/**
 * The group, then the processes that left it. Where /proc is read, one scan of the processes started
 * since the leader comes first (`Strays.collect`): when it finds the group and the strays gone, which
 * is how most processes end, nothing else is probed. `leaderReaped`: the leader's exit was seen.
 */
const reapTree = (pgid: number, graceMs: number, watch: Watch, leaderReaped = false): Effect.Effect<void> =>
  Effect.suspend(() => {
    const strays = watch.strays
    if (strays !== undefined && !watch.gone) {
      const found = strays.collect(leaderReaped)
      if (!strays.groupAlive) {
        watch.gone = true
        if (found.length === 0 && strays.unsettled === 0) {
          watch.treeGone = true
          return Effect.void
        }
      }
    }
    return Effect.andThen(reapGroup(pgid, graceMs, watch), reapStrays(graceMs, watch))
  })

/** A result file larger than `maxResultBytes`: its size, from `stat` (the file is not read). */
class ResultTooLarge extends Data.TaggedError("ResultTooLarge")<{ readonly size: number }> {}

/** The file's text, reading no more than `max` bytes (a file larger than `max` is not read at all). */
const readBounded = async (file: string, max: number | undefined): Promise<string> => {
  if (max === undefined) return fsp.readFile(file, "utf8")
  const handle = await fsp.open(file, "r")
  try {
    const { size } = await handle.stat()
    if (size > max) throw new ResultTooLarge({ size })
    const buffer = Buffer.alloc(Math.min(size, max) + 1)
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0)
    if (bytesRead > max) throw new ResultTooLarge({ size: (await handle.stat()).size })
    return buffer.toString("utf8", 0, bytesRead)
  } finally {
    await handle.close()
  }
}

const readResult = (
  plan: Plan,
  protocol: Protocol.Protocol,
  seen: Protocol.Seen,
  failed: (detail: string) => ProcessFailed,
  tooLarge: (detail: string) => ProcessFailed,
  maxBytes: number | undefined
) =>
  Effect.suspend(() => {
    if (plan.resultPath === undefined) return Effect.succeed(undefined)
    // Most processes write no result: then no asynchronous read at all.
    if (!protocol.resultRequired && !fs.existsSync(plan.resultPath)) {
      seen.resultMissing = true
      return Effect.succeed(undefined)
    }
    return Effect.tryPromise({
      try: async () => {
        let text: string
        try {
          text = await readBounded(plan.resultPath!, maxBytes)
        } catch (error) {
          if (!protocol.resultRequired && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined
          throw error
        }
        try {
          return JSON.parse(text) as unknown
        } catch (error) {
          throw new Error(`the result file is not valid JSON (${(error as Error).message})`)
        }
      },
      catch: (error) =>
        error instanceof ResultTooLarge
          ? tooLarge(`${plan.resultPath} is ${error.size} bytes`)
          : failed(`${plan.resultPath}: ${error instanceof Error ? error.message : String(error)}`)
    })
  })

const usageWarning = (spec: ProcessSpec) => (message: string) =>
  spec.onWarning === undefined ? Effect.logWarning(message) : Effect.sync(() => spec.onWarning!(message))

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

const supervise = Effect.fnUntraced(function* (
  spec: ProcessSpec,
  plan: Plan,
  protocol: Protocol.Protocol,
  seen: Protocol.Seen
) {
  const limits = spec.limits ?? {}
  const clock = yield* Clock.Clock
  const scope = yield* Scope.Scope
  const context = yield* Effect.context<never>()
  const startedAt = clock.currentTimeMillisUnsafe()
  const log = yield* openLog(plan.logPath).pipe(
    Effect.mapError((error) => startFailure(spec, plan.name, `cannot open log file: ${error.message}`))
  )
  for (const warning of plan.warnings) yield* Effect.logWarning(warning)
  if (limits.memoryMb !== undefined && !procAvailable) {
    yield* Effect.logWarning(`memoryMb limit of process "${plan.name}" is not enforced: /proc is not available`)
  }
  const output = new LineCollector({
    redact: redactWith(plan.secrets),
    secrets: plan.secrets,
    onLine: spec.onLine,
    maxOutputBytes: limits.maxOutputBytes,
    logging: plan.logPath !== undefined,
    now: () => clock.currentTimeMillisUnsafe()
  })
  if (plan.logPath !== undefined) yield* log.write(`[corral] $ ${plan.display}\n`)
  const watch: Watch = {
    measured: { peakRssBytes: 0, userMs: 0, systemMs: 0, leaderCpuMs: 0 },
    breach: undefined,
    gone: false,
    strays: undefined,
    treeGone: false
  }
  let stopWatchdog: Effect.Effect<void> = Effect.void
  if (plan.bridge !== undefined)
    yield* openBridge(plan.bridge).pipe(
      Effect.mapError((error) => startFailure(spec, plan.name, `cannot open the network bridge: ${error.message}`))
    )
  const guard = spec.dieWith === undefined ? undefined : yield* startGuard(spec, plan, spec.dieWith)
  const handle = yield* spawn(plan).pipe(
    Effect.tapError(() => Effect.sync(() => guard?.spawned(undefined))),
    Effect.tap((handle) =>
      Scope.addFinalizer(
        scope,
        Effect.ensuring(
          Effect.andThen(
            Effect.suspend(() => stopWatchdog),
            reapTree(handle.pid, plan.killGraceMs, watch)
          ),
          Effect.sync(() => {
            spec.onProcess?.(undefined)
            handle.release()
          })
        )
      )
    ),
    Effect.map((handle) => {
      guard?.spawned(handle.pid)
      launchedLeader(handle.pid)
      if (procAvailable) watch.strays = new Strays(handle.pid, plan.token)
      spec.onProcess?.(handle.pid)
      return handle
    }),
    Effect.tap((handle) => Effect.ignore(handle.unref)),
    Effect.uninterruptible
  )
  const usage = new UsageTail(
    protocol.usagePath,
    plan.name,
    usageWarning(spec),
    spec.onUsage,
    usageLimit(handle.pid, limits, protocol.usagePath, watch)
  )
  stopWatchdog = watchdog(handle.pid, limits, watch, usage, context)
  if (limits.cpuPercent !== undefined || limits.diskMb !== undefined) {
    yield* Effect.forkScoped(guards(handle.pid, spec, plan.cwd, (breach) => breachOnce(handle.pid, watch, breach)))
  }
  const onOverLimit = () =>
    limits.maxOutputBytes === undefined
      ? Effect.void
      : enforceOutputLimit(handle.pid, plan, watch, limits.maxOutputBytes, scope)
  const reading = yield* readers(handle, output, log, plan.logPath !== undefined, onOverLimit, context)
  const exit = yield* Effect.exit(handle.exitCode)
  yield* reapTree(handle.pid, plan.killGraceMs, watch, Exit.isSuccess(exit))
  yield* awaitDone(reading, plan.killGraceMs + 1000)
  watch.breach ??= yield* finalDiskCheck(spec, plan.cwd)
  yield* stopWatchdog
  stopWatchdog = Effect.void
  yield* usage.read(true)
  seen.usageMissing = usage.missing
  seen.treeGone = watch.treeGone
  const ended: Ended = {
    plan,
    limits,
    exit,
    breach: watch.breach,
    measured: watch.measured,
    output,
    durationMs: clock.currentTimeMillisUnsafe() - startedAt
  }
  if (plan.logPath !== undefined) yield* log.write(`[corral] ${describeEnd(ended)} after ${ended.durationMs} ms\n`)
  const failure = classify(ended)
  if (failure !== undefined) return yield* failure
  const result = yield* readResult(
    plan,
    protocol,
    seen,
    (detail) => new ProcessFailed({ ...failureBase(ended), detail }),
    (detail) =>
      new ProcessFailed({
        ...failureBase(ended),
        reason: "limit",
        limit: "maxResultBytes",
        limitValue: limits.maxResultBytes,
        detail
      }),
    limits.maxResultBytes
  )
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

/** The plan and its protocol files, or the failure to start with (nothing left behind). */
type Planned = readonly [Plan, Protocol.Protocol] | Effect.Effect<never, ProcessFailed>

const invalid = (spec: ProcessSpec, detail: string) => {
  const command = redactWith(secretValues(spec, childEnv(spec)))(spec.command)
  return startFailure({ ...spec, command }, defaultName(spec), detail)
}

const prepareFailure = (spec: ProcessSpec, name: string, error: unknown) =>
  startFailure(
    spec,
    name,
    `cannot prepare the CORRAL_* files: ${error instanceof Error ? error.message : String(error)}`
  )

/**
 * A sandboxed process can write only to its cwd and private folders: the protocol folder is one, so it
 * is prepared before the plan. Without `protocolDir` (a folder of the user's, touched only for a valid
 * spec) the plan is made once; then an invalid spec removes the folder again.
 */
const planSandboxed = (spec: ProcessSpec): Planned => {
  const withProtocol = (protocol: Protocol.Protocol) =>
    makePlan({ ...spec, privateDirs: [...(spec.privateDirs ?? []), protocol.dir] })
  if (spec.protocolDir === undefined) {
    const name = defaultName(spec)
    let protocol: Protocol.Protocol
    try {
      protocol = Protocol.prepare(spec, name, path.resolve(spec.cwd ?? process.cwd()), true)
    } catch (error) {
      return Effect.fail(prepareFailure(spec, name, error))
    }
    const planned = withProtocol(protocol)
    return planned._tag === "Invalid"
      ? Effect.andThen(Protocol.cleanup(protocol, spec), Effect.fail(invalid(spec, planned.detail)))
      : ([planned.plan, protocol] as const)
  }
  const planned = makePlan(spec)
  if (planned._tag === "Invalid") return Effect.fail(invalid(spec, planned.detail))
  let protocol: Protocol.Protocol
  try {
    protocol = Protocol.prepare(spec, planned.plan.name, planned.plan.cwd, true)
  } catch (error) {
    return Effect.fail(prepareFailure(spec, planned.plan.name, error))
  }
  const replanned = withProtocol(protocol)
  return replanned._tag === "Invalid"
    ? Effect.fail(startFailure(spec, planned.plan.name, replanned.detail))
    : ([replanned.plan, protocol] as const)
}

const planPlain = (spec: ProcessSpec): Planned => {
  const planned = makePlan(spec)
  if (planned._tag === "Invalid") return Effect.fail(invalid(spec, planned.detail))
  try {
    return [planned.plan, Protocol.prepare(spec, planned.plan.name, planned.plan.cwd)] as const
  } catch (error) {
    return Effect.fail(prepareFailure(spec, planned.plan.name, error))
  }
}

export const run = (
  spec: ProcessSpec
): Effect.Effect<ProcessResult, ProcessFailed, ChildProcessSpawner.ChildProcessSpawner> =>
  Effect.suspend(() => {
    const planned = sandboxOptions(spec) === undefined ? planPlain(spec) : planSandboxed(spec)
    if (!Array.isArray(planned)) return planned as Effect.Effect<never, ProcessFailed>
    const [made, protocol] = planned
    const plan: Plan = { ...made, env: { ...made.env, ...protocol.env }, resultPath: protocol.resultPath }
    const seen = Protocol.nothingSeen()
    return Effect.scoped(supervise(spec, plan, protocol, seen)).pipe(
      Effect.ensuring(Protocol.cleanup(protocol, spec, seen))
    )
  })
