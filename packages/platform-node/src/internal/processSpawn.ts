/**
 * A process agent started through the spawn helper (`spawnHelper.ts`) instead of by this process:
 * Node's `spawn()` forks the caller's whole address space and blocks its main thread until the child's
 * `exec`, which costs more the larger corral's process is (the CLI, a runner). The helper forks its
 * own small process; the pid, the output and the exit come back over its pipe.
 *
 * What the runner gets is the part of effect's `ChildProcessHandle` it uses (`Started`): the pid
 * (the leader of a new process group and session, as with `detached: true`), standard output and
 * error (one queue of both, see `Output`), and the exit. Killing is the runner's own (signals to the group by pid). When the
 * helper dies while the process runs, the exit fails ("the spawn helper died"), the runner treats the
 * process as failed and kills its group; its output so far is kept.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as PlatformError from "effect/PlatformError"
import { ExitCode } from "effect/process/ChildProcessSpawner"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { Plan } from "./processPlan.ts"
import { type ExecError, sharedHelper } from "./spawnHelper.ts"

/** A chunk of an agent's output as the helper read it: `fd` 1 is standard output, 2 standard error. */
export interface OutputChunk {
  readonly fd: 1 | 2
  readonly bytes: Uint8Array
}

/** Where the output of a process started through the helper goes, chunk by chunk, as the helper read it. */
export interface ChunkSink {
  readonly data: (fd: 1 | 2, bytes: Uint8Array) => void
  /** Both outputs ended, or the helper died. */
  readonly end: () => void
}

/**
 * The output of a started process: effect's two streams (started by this process), or, through the
 * helper, both outputs' chunks in the order the helper read them, handed to the one sink given to
 * `listen` (what came before it is kept for it), ended once both outputs are (no stream per output:
 * streams cost ≈ 35 µs of CPU per process). The reader calls `consumed` with the bytes it took, so
 * the helper resumes forwarding.
 */
export type Output =
  | {
      readonly _tag: "Streams"
      readonly stdout: Stream.Stream<Uint8Array, unknown>
      readonly stderr: Stream.Stream<Uint8Array, unknown>
    }
  | {
      readonly _tag: "Chunks"
      readonly listen: (sink: ChunkSink) => void
      readonly consumed: (bytes: number) => void
    }

/** Chunks kept until the sink is given, then handed to it as they come. */
const chunkOutput = () => {
  let kept: Array<OutputChunk> = []
  let ended = false
  let sink: ChunkSink | undefined
  return {
    data: (fd: 1 | 2, bytes: Uint8Array) => {
      if (sink !== undefined) sink.data(fd, bytes)
      else kept.push({ fd, bytes })
    },
    end: () => {
      if (ended) return
      ended = true
      sink?.end()
    },
    listen: (given: ChunkSink) => {
      sink = given
      const earlier = kept
      kept = []
      for (const chunk of earlier) given.data(chunk.fd, chunk.bytes)
      if (ended) given.end()
    }
  }
}

/** The started process, by whichever way it was started. */
export interface Started {
  readonly pid: number
  readonly output: Output
  readonly exitCode: Effect.Effect<ExitCode, PlatformError.PlatformError>
  /** Lets go of the process once it is started (a process this process started: see `keepAlive` in `processRun.ts`). */
  readonly unref: Effect.Effect<unknown, unknown, Scope.Scope>
  /** Called once the caller is done with the process (when its scope closes): the helper forgets it. */
  readonly release: () => void
}

type Ending =
  | { readonly _tag: "Exit"; readonly code: number | null; readonly signal: string | null }
  | { readonly _tag: "Lost"; readonly error: ExecError }

const exitError = (method: string, message: string) =>
  PlatformError.systemError({ _tag: "Unknown", module: "ChildProcess", method, cause: new Error(message) })

const toExitCode = (ending: Ending): Effect.Effect<ExitCode, PlatformError.PlatformError> => {
  if (ending._tag === "Lost") return Effect.fail(exitError("exitCode", ending.error.message))
  if (ending.code !== null) return Effect.succeed(ExitCode(ending.code))
  // The wording of effect's spawner, which `processExit.signalOf` reads.
  return Effect.fail(exitError("exitCode", `Process interrupted due to receipt of signal: '${ending.signal}'`))
}

let throughHelper = true

/** Whether agents go through the helper when it is ready (tests turn it off to cover the other way). */
export const setThroughHelper = (on: boolean): void => {
  throughHelper = on
}

/**
 * Starts the plan's process through the helper; `undefined` when the helper is not ready (disabled,
 * still starting, or dead) or not to be used, so the caller starts it itself. The helper forgets the
 * process at `release`, which the caller calls in the finalizer that reaps the process (one finalizer
 * per run: a scope closes one faster than two). Run it uninterruptibly: the pid arrives
 * asynchronously and must reach the caller, who registers that finalizer at once.
 */
export const spawnThroughHelper = <E>(
  plan: Plan,
  startFailure: (detail: string) => E
): Effect.Effect<Started, E> | undefined => {
  const helper = sharedHelper()
  if (!throughHelper) return undefined
  if (helper.pid === undefined) {
    helper.start()
    return undefined
  }
  return Effect.callback<Started, E>((resume) => {
    const chunks = chunkOutput()
    let resumed = false
    let open = 2
    // The first ending counts (an exit, or the helper lost); read once, by the runner.
    let ending: Ending | undefined
    let onEnding: ((ending: Ending) => void) | undefined
    const end = (reported: Ending) => {
      if (ending !== undefined) return
      ending = reported
      onEnding?.(reported)
    }
    const exitCode = Effect.suspend(() =>
      ending !== undefined
        ? toExitCode(ending)
        : Effect.callback<ExitCode, PlatformError.PlatformError>((resume) => {
            onEnding = (reported) => resume(toExitCode(reported))
            return Effect.sync(() => {
              onEnding = undefined
            })
          })
    )
    const id = helper.spawnAgent(
      { file: plan.argv[0]!, args: plan.argv.slice(1), cwd: plan.cwd, env: plan.env },
      {
        started: (pid, error) => {
          resumed = true
          if (pid === undefined) {
            resume(Effect.fail(startFailure(error?.message ?? "the spawn helper could not start it")))
            return
          }
          resume(
            Effect.succeed({
              pid,
              output: { _tag: "Chunks", listen: chunks.listen, consumed: (bytes) => helper.consumed(id!, bytes) },
              exitCode,
              unref: Effect.void,
              release: () => helper.release(id!)
            })
          )
        },
        data: chunks.data,
        end: () => {
          if (--open === 0) chunks.end()
        },
        exit: (code, signal) => end({ _tag: "Exit", code, signal }),
        lost: (error) => {
          chunks.end()
          end({ _tag: "Lost", error })
          if (!resumed) resume(Effect.fail(startFailure(error.message)))
          resumed = true
        }
      }
    )
    if (id === undefined) resume(Effect.fail(startFailure("the spawn helper is not running")))
  })
}
