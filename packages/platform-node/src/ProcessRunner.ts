/**
 * Run any command as a supervised child process: its own process group, a minimal environment, secret
 * redaction, a log file, resource limits, and a typed `ProcessFailed` error. Interrupting the effect (or a
 * timeout) terminates the whole process tree: SIGTERM to the group, SIGKILL after `killGrace`.
 *
 * @since 0.1.0
 */
import type * as Usage from "@corral/core/Usage"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as ChildProcessSpawner from "effect/process/ChildProcessSpawner"
import type { ProcessFailed } from "./internal/processError.ts"
import * as internal from "./internal/processRun.ts"

export { type FailureReason, type LimitName, ProcessFailed } from "./internal/processError.ts"

/**
 * Resource limits of a process. `memoryMb` and `maxOutputBytes` are enforced by the runner for the whole
 * process tree; `cpuSeconds`, `fileSizeMb` and `maxProcesses` are rlimits set on the child (inherited by
 * its descendants, but counted per process; `maxProcesses` is RLIMIT_NPROC, which Linux counts per user
 * and ignores for root).
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessLimits {
  /** Sum of the RSS of every process in the group, sampled every 100 ms; exceeding it kills the tree. */
  readonly memoryMb?: number
  /** RLIMIT_CPU (SIGXCPU at the limit, SIGKILL one second later). */
  readonly cpuSeconds?: number
  /** RLIMIT_FSIZE: largest file the process may write (SIGXFSZ). */
  readonly fileSizeMb?: number
  /** RLIMIT_NPROC: per user on Linux, not per process tree; ignored for root. */
  readonly maxProcesses?: number
  /**
   * An increment to the niceness the process inherits from corral (`nice -n N`): positive values
   * lower its priority; the result is capped at 19, and a negative increment needs privileges (GNU
   * `nice` then warns and runs the program unchanged). Where no `nice` executable is on the PATH
   * the limit is not applied and a warning is logged.
   */
  readonly nice?: number
  /** Total stdout + stderr bytes; exceeding it stops capturing and terminates the tree. */
  readonly maxOutputBytes?: number
  /**
   * Largest result file (`$CORRAL_RESULT_FILE` or `resultFile`) read after the process exits: a larger
   * file is not read (its size comes from `stat`, then at most this many bytes are read) and the run
   * fails with `limit: "maxResultBytes"`. Without it the whole file is read.
   */
  readonly maxResultBytes?: number
  /**
   * Largest usage file (`$CORRAL_USAGE_FILE`): its lines up to this many bytes are read; once the file
   * is found larger, the group is killed with SIGKILL and the run fails with `limit: "maxUsageBytes"`.
   * Without it the whole file is read. Either way it is read in 64 KiB pieces and a line longer than
   * 64 KiB is skipped with a warning.
   */
  readonly maxUsageBytes?: number
  /**
   * Share of one core the process group may use (1–100): a duty cycle of SIGSTOP/SIGCONT driven by the
   * group's CPU time from /proc, checked every 100 ms. Not a failure when reached: the group is slowed down.
   */
  readonly cpuPercent?: number
  /**
   * Bytes on disk under `cwd` and `privateDirs`, measured every 500 ms and once more at exit; exceeding it
   * kills the tree and fails with `limit: "diskMb"`.
   */
  readonly diskMb?: number
}

/**
 * What a sandboxed process may reach besides the system (read-only), its `cwd` and its `privateDirs`
 * (read-write). Linux only, through bubblewrap (`bwrap`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SandboxOptions {
  /**
   * `true`: the host's network. `false`: an own network namespace with only its own loopback.
   * `"loopback"`: an own network namespace in which `127.0.0.1:<port>` reaches the host's
   * `127.0.0.1:<port>` for the `allow.ports` only (a forwarder run with this Node binary, started before
   * the command). @default true
   */
  readonly network?: boolean | "loopback"
  /**
   * Extra paths visible inside the sandbox, read-only (`read`) or read-write (`write`), and the host's
   * `127.0.0.1` TCP ports reachable with `network: "loopback"`.
   */
  readonly allow?: {
    readonly read?: ReadonlyArray<string>
    readonly write?: ReadonlyArray<string>
    readonly ports?: ReadonlyArray<number>
  }
  /**
   * Folders inside visible paths (typically inside `cwd`) to make invisible: an empty, read-only folder
   * is mounted over each, so reads find nothing and writes fail. Paths inside them that are mounted
   * explicitly (`privateDirs`, `allow`) stay visible.
   */
  readonly hide?: ReadonlyArray<string>
}

/**
 * One line of output, passed to `ProcessSpec.onLine`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutputLine {
  readonly stream: "stdout" | "stderr"
  readonly text: string
}

/**
 * What to run and how.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessSpec {
  /** The executable (looked up in the child's PATH), or a shell script when `shell` is true. */
  readonly command: string
  readonly args?: ReadonlyArray<string>
  /** Run `command` with `/bin/sh -c`. `args` are ignored. */
  readonly shell?: boolean
  readonly cwd?: string
  /** Added to a minimal inherited environment (PATH, HOME, LANG, LANGUAGE, LC_*, TERM, USER, LOGNAME, SHELL, TMPDIR, TZ, NODE_*). */
  readonly env?: Record<string, string>
  /** Pass the whole parent environment instead of the minimal one. @default false */
  readonly inheritEnv?: boolean
  /** Names of env vars whose values are replaced by `***` in every captured line; passed from the parent env if not in `env`. */
  readonly secrets?: ReadonlyArray<string>
  /** Write stdout and stderr, interleaved and marked `[out]`/`[err]`, to `<logDir>/<name>.log`. */
  readonly logDir?: string
  /** Used in messages and as the log file name. @default the command's base name */
  readonly name?: string
  readonly limits?: ProcessLimits
  /** Time between SIGTERM and SIGKILL when the tree is terminated. @default "2 seconds" */
  readonly killGrace?: Duration.Input
  /**
   * Called for output lines (secrets redacted), at most 20 lines and 32 Ki characters per second
   * (burst the same); further lines are dropped and counted. A line longer than 4096 characters is
   * passed clipped, ending in `…`; a line longer than 64 KiB arrives in pieces.
   */
  readonly onLine?: (line: OutputLine) => void
  /** Called with the process (and process group) id once it started, and again with `undefined` once it is gone. */
  readonly onProcess?: (pid: number | undefined) => void
  /**
   * The pid of a process the command must not outlive (a cluster runner passes its own): once that
   * process is gone — SIGKILL included, which runs no finalizer — the command's process group and
   * every process carrying its `CORRAL_PROCESS_TOKEN` are killed, within about half a second. A small
   * `/bin/sh` watchdog started before the command checks `/proc/<pid>/stat` (pid and start time, so
   * a reused pid does not count; `kill -0` without /proc); it is stopped when the run ends. When the
   * watchdog cannot be started, the command is not started either (`ProcessFailed`, reason `spawn`).
   */
  readonly dieWith?: number
  /**
   * A JSON file (relative to `cwd`) the command writes; parsed into `ProcessResult.result` on success, and
   * a missing or invalid file fails the run. Without it the command may write JSON to `$CORRAL_RESULT_FILE`
   * (a missing file then means no result; invalid JSON still fails).
   */
  readonly resultFile?: string
  /**
   * Values of the agent's dependencies by id, written as `<id>.json` into the folder named by
   * `$CORRAL_DEPS_DIR` (entries that are `undefined` are left out).
   */
  readonly deps?: Readonly<Record<string, unknown>>
  /**
   * Folder (relative to `cwd`) for `usage.jsonl` (`$CORRAL_USAGE_FILE`), `result.json`
   * (`$CORRAL_RESULT_FILE`) and `deps/` (`$CORRAL_DEPS_DIR`); kept after the run. Default: files of a
   * private temporary directory (in a folder of their own there for `deps` or a sandbox), removed after
   * the run.
   */
  readonly protocolDir?: string
  /** Called with warnings about malformed `$CORRAL_USAGE_FILE` lines. Default: `Effect.logWarning`. */
  readonly onWarning?: (message: string) => void
  /** Called with the usage read from each batch of new `$CORRAL_USAGE_FILE` lines (also passed to `Usage.report`). */
  readonly onUsage?: (usage: Usage.Usage) => void
  /**
   * Run inside a bubblewrap sandbox: `true` or options. Fails at start (reason `spawn`) when the machine
   * cannot sandbox; there is no fallback to an unsandboxed run.
   */
  readonly sandbox?: boolean | SandboxOptions
  /**
   * Folders that belong to this process alone (its temp, cache and data folders): read-write in a sandbox,
   * and counted with `cwd` by `limits.diskMb`.
   */
  readonly privateDirs?: ReadonlyArray<string>
}

/**
 * CPU time and peak memory of the process tree, from /proc samples taken every 100 ms, every 500 ms after
 * the first 2 seconds without a `memoryMb` limit (zero where /proc is not available). CPU time includes
 * reaped children and can miss up to one interval of CPU before exit.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessUsage {
  readonly cpuUserMs: number
  readonly cpuSystemMs: number
  readonly peakRssMb: number
}

/**
 * A successful run.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessResult {
  readonly exitCode: 0
  readonly durationMs: number
  readonly logPath?: string
  /** The last 50 output lines (stdout and stderr), secrets redacted. */
  readonly tail: ReadonlyArray<string>
  readonly result?: unknown
  readonly usage: ProcessUsage
  /** Lines not passed to `onLine` because of throttling. */
  readonly droppedLines: number
}

/**
 * Runs a process to completion. Succeeds when it exits with code 0; fails with `ProcessFailed` on a non-zero
 * exit, a signal, an exceeded limit, a start problem or an invalid result file. Interruption kills the whole
 * process tree. Needs a `ChildProcessSpawner` (`NodeServices.layer`) and the live clock.
 *
 * @example
 * ```ts
 * import { ProcessRunner } from "@corral/platform-node"
 * import { NodeServices } from "@effect/platform-node"
 * import { Effect } from "effect"
 *
 * const build = ProcessRunner.run({
 *   name: "build",
 *   command: "pnpm",
 *   args: ["build"],
 *   logDir: ".corral/logs",
 *   limits: { memoryMb: 2048, cpuSeconds: 600 }
 * }).pipe(Effect.timeout("10 minutes"), Effect.provide(NodeServices.layer))
 * ```
 *
 * @since 0.1.0
 * @category running
 */
export const run: (
  spec: ProcessSpec
) => Effect.Effect<ProcessResult, ProcessFailed, ChildProcessSpawner.ChildProcessSpawner> = internal.run
