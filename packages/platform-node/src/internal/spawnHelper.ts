/**
 * Short commands (git) and process agents (`spawnAgent`, see `processSpawn.ts`) started by a small
 * helper process instead of this one.
 *
 * Node's `spawn()` forks the calling process: the kernel copies its page tables and the child tears
 * them down again at `exec`, and the main thread waits for that (libuv reads the exec status
 * synchronously). The cost grows with the caller's memory: a few ms of CPU per command at the CLI's
 * ≈ 200 MB RSS, and far more wall time on a loaded machine, while the main thread is blocked. The
 * helper is a Node process with no imports but `node:child_process` (≈ 40 MB) and no V8 worker
 * threads, started once and fed JSON lines over a pipe; each command it starts forks that small
 * process instead. No package does
 * this (a native `posix_spawn` binding would need a compiler or prebuilt binaries per platform).
 *
 * An agent is spawned `detached` with its standard input ignored; the helper replies with its pid at
 * once, then forwards its output (base64 in JSON lines, in the order it read it) and its exit. The end
 * of an output that closes while the process runs is held and sent in the exit's line (`ends`): a
 * short process then costs two lines each way instead of four (each line wakes the other process);
 * an output that stays open after the exit (a process it started still holds it) ends on a line of
 * its own, and the exit is never held. Output
 * is flow-controlled both ways, so a flood fills pipes, not memory: the helper stops reading an
 * agent's output while its own pipe to this process is full, and this process stops reading the
 * helper while more than 4 MiB it forwarded wait to be consumed (`consumed`).
 *
 * Guarantees for short commands, as with `execFile`: exit code or signal, stdout and stderr (UTF-8), `cwd`, `env`,
 * standard input and `maxBuffer`. When its caller aborts, a command gets 1 s to finish, then SIGTERM,
 * then SIGKILL 1 s later ({@link StopGrace}: SIGTERM at once can leave git's lock files), and the
 * callback comes only once it has exited, in this process and in the helper alike (a helper that dies
 * during that grace has sent the command's pid, and this process goes on stopping it): a git command
 * stopped while it holds a lock has removed it when its caller's interruption completes. Lifetime: the
 * helper ignores SIGINT, SIGTERM and SIGHUP (a Ctrl-C reaches the whole foreground group, and the
 * caller's cleanup still needs git) and exits when its standard input ends, which happens when this
 * process exits or is killed (it holds the only write end). Commands it started keep running then,
 * as they would if this process had started them. The helper does not keep this process alive.
 *
 * Fallback: commands run with `execFile` in this process while the helper starts, when it cannot
 * start or died (it is not restarted), and when `CORRAL_SPAWN_HELPER=0`. A command in flight when the
 * helper dies gets `error.code` `"EHELPER"` (its outcome is unknown, so it is not run again).
 *
 * @internal
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import * as Effect from "effect/Effect"

/**
 * How an aborted command is stopped: it gets `finishMs` to exit by itself, then SIGTERM, then SIGKILL
 * `killMs` later. Not SIGTERM at once: git installs the handler that removes its lock files only
 * once it has created its first one, so a SIGTERM that lands while it creates it kills git with the
 * lock in place (`read-tree -u` in a new worktree, signalled 0–4 ms after its start: 16 of 31 killed
 * left `index.lock`; git 2.39). Git's commands take milliseconds, and a command that runs to its end
 * leaves no lock; the signals only bound the wait for one that hangs. 1 s each, so that a command
 * aborted by an agent's timeout (or any stop) is gone within 2 s, the bound `ProcessRunner`'s
 * `killGrace` sets for the agent's own command (SIGTERM, SIGKILL 2 s later).
 */
export interface StopGrace {
  readonly finishMs: number
  readonly killMs: number
}

const defaultGrace: StopGrace = { finishMs: 1000, killMs: 1000 }

/** What an aborted command reports, once it has exited. */
const ABORTED: ExecError = { code: "ABORT_ERR", signal: null, message: "The operation was aborted" }

/** The helper's program, run with `node -e` so it needs no file of its own in any packaging. */
const HELPER_SOURCE = `"use strict"
const { execFile, spawn } = require("node:child_process")
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => {})
const running = new Map()
const send = (message) => process.stdout.write(JSON.stringify(message) + "\\n")
const paused = new Set()
process.stdout.on("drain", () => {
  for (const stream of paused) stream.resume()
  paused.clear()
})
const failure = (error) => ({ code: error.code ?? "EINVAL", signal: null, message: error.message })
const start = (r) => {
  let child
  try {
    child = execFile(r.file, r.args, { cwd: r.cwd, env: r.env, maxBuffer: r.maxBuffer }, (error, stdout, stderr) => {
      if (!running.delete(r.id)) return
      const failure = error === null ? null : { code: error.code ?? null, signal: error.signal ?? null, message: error.message }
      send({ id: r.id, error: failure, stdout, stderr })
    })
  } catch (error) {
    send({ id: r.id, error: failure(error), stdout: "", stderr: "" })
    return
  }
  running.set(r.id, child)
  if (r.input !== undefined) {
    child.stdin.on("error", () => {})
    child.stdin.end(r.input)
  }
}
const kill = (r) => {
  const child = running.get(r.kill)
  if (child === undefined) return
  running.delete(r.kill)
  const gone = () => send({ id: r.kill, error: ${JSON.stringify(ABORTED)}, stdout: "", stderr: "" })
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return gone()
  send({ id: r.kill, stopping: child.pid })
  let timer = setTimeout(() => {
    child.kill("SIGTERM")
    timer = setTimeout(() => child.kill("SIGKILL"), r.killMs)
  }, r.finishMs)
  child.once("exit", () => {
    clearTimeout(timer)
    gone()
  })
}
const startAgent = (r) => {
  let child
  try {
    child = spawn(r.file, r.args, { cwd: r.cwd, env: r.env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  } catch (error) {
    send({ id: r.id, error: failure(error) })
    return
  }
  if (child.pid === undefined) {
    child.on("error", (error) => send({ id: r.id, error: failure(error) }))
    return
  }
  send({ id: r.id, pid: child.pid })
  child.on("error", () => {})
  let exited = false
  const open = new Set([1, 2])
  const held = []
  const ended = (fd) => {
    if (!open.delete(fd)) return
    if (exited) send({ id: r.id, fd, end: true })
    else held.push(fd)
  }
  for (const fd of [1, 2]) {
    const stream = fd === 1 ? child.stdout : child.stderr
    stream.on("data", (chunk) => {
      if (send({ id: r.id, fd, data: chunk.toString("base64") })) return
      stream.pause()
      paused.add(stream)
    })
    stream.on("end", () => ended(fd))
    stream.on("close", () => ended(fd))
  }
  child.on("exit", (code, signal) => {
    exited = true
    send(held.length === 0 ? { id: r.id, exit: code, signal } : { id: r.id, exit: code, signal, ends: held })
  })
}
let buffered = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (chunk) => {
  buffered += chunk
  let end
  while ((end = buffered.indexOf("\\n")) !== -1) {
    const line = buffered.slice(0, end)
    buffered = buffered.slice(end + 1)
    const r = JSON.parse(line)
    if (r.kill !== undefined) kill(r)
    else if (r.agent === true) startAgent(r)
    else start(r)
  }
})
process.stdin.on("end", () => process.exit(0))
process.stdout.on("error", () => process.exit(0))
send({ ready: process.pid })
`

export interface ExecRequest {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly input?: string | undefined
  readonly maxBuffer: number
}

/** What `execFile` reports: `code` is the exit code, or an error code (`"ENOENT"`, `"EHELPER"`…). */
export interface ExecError {
  readonly code: number | string | null
  readonly signal: string | null
  readonly message: string
}

export type ExecCallback = (error: ExecError | null, stdout: string, stderr: string) => void

interface Reply {
  readonly id: number
  readonly error: ExecError | null
  readonly stdout: string
  readonly stderr: string
}

/** A long-running process started through the helper, in a process group and session of its own. */
export interface AgentRequest {
  readonly file: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string | undefined>>
}

/**
 * What the helper reports about a process it started for `spawnAgent`, in this order: `started` (a
 * pid, or why it could not start: then nothing follows), then output chunks, the end of each output
 * stream and the exit, interleaved as they happen (an output that ended while the process ran is
 * reported right before its exit); `lost` when the helper died before all of it came.
 */
export interface AgentListener {
  readonly started: (pid: number | undefined, error: ExecError | undefined) => void
  readonly data: (fd: 1 | 2, chunk: Buffer) => void
  readonly end: (fd: 1 | 2) => void
  readonly exit: (code: number | null, signal: string | null) => void
  readonly lost: (error: ExecError) => void
}

type AgentMessage =
  | { readonly id: number; readonly pid: number }
  | { readonly id: number; readonly error: ExecError }
  | { readonly id: number; readonly fd: 1 | 2; readonly data: string }
  | { readonly id: number; readonly fd: 1 | 2; readonly end: true }
  | {
      readonly id: number
      readonly exit: number | null
      readonly signal: string | null
      /** The outputs that ended before the exit, in the order they ended. */
      readonly ends?: ReadonlyArray<1 | 2>
    }

/** The helper stops an aborted command, `pid` (sent before its grace starts). */
interface Stopping {
  readonly id: number
  readonly stopping: number
}

/** Handles one message of a request; true when it was the request's last. */
type Receiver = (message: Reply | AgentMessage) => boolean

const UNCONSUMED_HIGH = 4 * 1024 * 1024
const UNCONSUMED_LOW = 1024 * 1024

type State =
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Starting"; readonly child: ChildProcess }
  | { readonly _tag: "Ready"; readonly child: ChildProcess; readonly pid: number }
  | { readonly _tag: "Unavailable"; readonly reason: string }

/**
 * Stops `child` as {@link StopGrace} says; calls `gone` once it has exited (at once when it never
 * started or has exited already).
 */
const terminate = (child: ChildProcess, grace: StopGrace, gone: () => void): void => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
    gone()
    return
  }
  let timer = setTimeout(() => {
    child.kill("SIGTERM")
    timer = setTimeout(() => child.kill("SIGKILL"), grace.killMs)
  }, grace.finishMs)
  child.once("exit", () => {
    clearTimeout(timer)
    gone()
  })
}

/** Whether process `pid` has ended (a zombie no parent has reaped yet counts as ended). */
const ended = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat[stat.lastIndexOf(")") + 2] === "Z"
  } catch {
    return false
  }
}

/**
 * Goes on stopping `pid`, an aborted command whose helper died during its grace, which began at
 * `since` (the command is no child of this process: Node cannot wait for it, so this polls every
 * 20 ms): SIGTERM when the grace ends unless the helper sent it already (a second one could end git
 * while it removes its locks), SIGKILL `killMs` later; calls `gone` once it has ended, or `killMs`
 * after SIGKILL at the latest.
 */
const stopOrphan = (pid: number, since: number, grace: StopGrace, gone: () => void): void => {
  let signalled = Date.now() - since >= grace.finishMs ? 1 : 0
  const poll = setInterval(() => {
    const elapsed = Date.now() - since
    if (ended(pid) || elapsed >= grace.finishMs + 2 * grace.killMs) {
      clearInterval(poll)
      gone()
      return
    }
    const due = elapsed >= grace.finishMs + grace.killMs ? 2 : elapsed >= grace.finishMs ? 1 : 0
    if (due > signalled) {
      signalled = due
      try {
        process.kill(pid, due === 1 ? "SIGTERM" : "SIGKILL")
      } catch {
        // it ended meanwhile
      }
    }
  }, 20)
}

const direct = (
  request: ExecRequest,
  signal: AbortSignal | undefined,
  grace: StopGrace,
  callback: ExecCallback
): void => {
  if (signal?.aborted === true) {
    callback(ABORTED, "", "")
    return
  }
  let called = false
  const once: ExecCallback = (error, stdout, stderr) => {
    if (called) return
    called = true
    callback(error, stdout, stderr)
  }
  const child = execFile(
    request.file,
    request.args,
    { cwd: request.cwd, env: request.env, maxBuffer: request.maxBuffer },
    (error, stdout, stderr) => {
      const failure =
        error === null
          ? null
          : {
              code: (error as NodeJS.ErrnoException).code ?? null,
              signal: (error as { signal?: string | null }).signal ?? null,
              message: error.message
            }
      once(failure, stdout, stderr)
    }
  )
  signal?.addEventListener("abort", () => terminate(child, grace, () => once(ABORTED, "", "")), { once: true })
  if (request.input !== undefined) {
    // The command may exit before reading all of it; its exit code reports that.
    child.stdin?.on("error", () => undefined)
    child.stdin?.end(request.input)
  }
}

/**
 * States: `Idle` → (first command) `Starting` → (the helper's `ready` line) `Ready`; `Starting` or
 * `Ready` → (the helper exits, fails to start or breaks its protocol) `Unavailable`, for good.
 * Commands run directly in every state but `Ready`.
 */
export class SpawnHelper {
  private state: State
  private readonly pending = new Map<number, Receiver>()
  private readonly lostHandlers = new Map<number, (error: ExecError) => void>()
  /** Bytes of agents' output forwarded to their listeners and not consumed yet, by request id. */
  private readonly unconsumed = new Map<number, number>()
  private unconsumedTotal = 0
  private readingPaused = false
  private nextId = 0
  private buffered = ""
  private readonly node: string
  private readonly settled = Promise.withResolvers<number | undefined>()

  private readonly grace: StopGrace

  constructor(options: { readonly node?: string; readonly enabled?: boolean; readonly grace?: StopGrace } = {}) {
    this.node = options.node ?? process.execPath
    this.grace = options.grace ?? defaultGrace
    this.state =
      options.enabled === false ? { _tag: "Unavailable", reason: "disabled (CORRAL_SPAWN_HELPER=0)" } : { _tag: "Idle" }
  }

  /** The helper's pid once it is ready, else `undefined`. */
  get pid(): number | undefined {
    return this.state._tag === "Ready" ? this.state.pid : undefined
  }

  /** Why commands run in this process, or `undefined` while the helper is used or starting. */
  get unavailable(): string | undefined {
    return this.state._tag === "Unavailable" ? this.state.reason : undefined
  }

  /** Starts the helper if needed; resolves with its pid once it is ready, or `undefined` if it is unavailable. */
  ready(): Promise<number | undefined> {
    this.start()
    const state = this.state
    if (state._tag === "Unavailable") return Promise.resolve(undefined)
    if (state._tag === "Ready") return Promise.resolve(state.pid)
    // Whoever waits for the helper keeps this process alive until it answers.
    if (state._tag === "Starting") this.ref(state.child, true)
    return this.settled.promise.finally(() => {
      if (state._tag === "Starting" && this.pending.size === 0) this.ref(state.child, false)
    })
  }

  /** Starts the helper if it is not started yet; commands use it once it reported ready. */
  start(): void {
    if (this.state._tag === "Idle") this.launch()
  }

  /**
   * Runs a command like `execFile`: through the helper when it is ready, else in this process. The
   * callback comes once, when the command has exited. When `signal` aborts, the command is stopped as
   * {@link StopGrace} says and the callback, with `error.code` `"ABORT_ERR"`, comes once it has exited
   * (with its real outcome when it had exited before the abort).
   */
  exec(request: ExecRequest, signal: AbortSignal | undefined, callback: ExecCallback): void {
    this.start()
    const state = this.state
    if (state._tag !== "Ready" || signal?.aborted === true) {
      direct(request, signal, this.grace, callback)
      return
    }
    let stopping: { readonly pid: number; readonly since: number } | undefined
    const id = this.send(state.child, request, (message) => {
      const reply = message as Reply | Stopping
      if ("stopping" in reply) {
        stopping = { pid: reply.stopping, since: Date.now() }
        return false
      }
      if (stopping !== undefined && reply.error?.code === "EHELPER")
        stopOrphan(stopping.pid, stopping.since, this.grace, () => callback(ABORTED, "", ""))
      else callback(reply.error, reply.stdout, reply.stderr)
      return true
    })
    signal?.addEventListener(
      "abort",
      () => {
        if (this.pending.has(id) && this.state._tag === "Ready")
          this.state.child.stdin!.write(`${JSON.stringify({ kill: id, ...this.grace })}\n`)
      },
      { once: true }
    )
  }

  /**
   * Starts a process through the helper when it is ready (detached: a process group and session of
   * its own; standard input ignored, output piped back over the helper's pipe), and returns the id to
   * `release` once the caller is done with it; `undefined` when the helper is not ready (then the
   * caller starts the process itself).
   */
  spawnAgent(request: AgentRequest, listener: AgentListener): number | undefined {
    this.start()
    const state = this.state
    if (state._tag !== "Ready") return undefined
    let open = 3
    const id = this.send(state.child, { agent: true, ...request }, (message) => {
      if ("pid" in message) listener.started(message.pid, undefined)
      else if ("data" in message) {
        const chunk = Buffer.from(message.data, "base64")
        this.account(id, chunk.length)
        listener.data(message.fd, chunk)
      } else if ("end" in message) {
        listener.end(message.fd)
        open -= 1
      } else if ("exit" in message) {
        for (const fd of message.ends ?? []) listener.end(fd)
        listener.exit(message.exit, message.signal)
        open -= 1 + (message.ends?.length ?? 0)
      } else if (message.error !== null) {
        listener.started(undefined, message.error)
        return true
      }
      return open === 0
    })
    this.lostHandlers.set(id, listener.lost)
    return id
  }

  /** The caller consumed `bytes` of the output of process `id`; reading resumes when little is left. */
  consumed(id: number, bytes: number): void {
    this.account(id, -bytes)
  }

  private account(id: number, bytes: number): void {
    const before = this.unconsumed.get(id)
    if (before === undefined && bytes < 0) return
    this.unconsumed.set(id, (before ?? 0) + bytes)
    this.unconsumedTotal += bytes
    this.flow()
  }

  private flow(): void {
    if (this.state._tag !== "Ready") return
    const stdout = this.state.child.stdout!
    if (!this.readingPaused && this.unconsumedTotal > UNCONSUMED_HIGH) {
      this.readingPaused = true
      stdout.pause()
    } else if (this.readingPaused && this.unconsumedTotal <= UNCONSUMED_LOW) {
      this.readingPaused = false
      stdout.resume()
    }
  }

  /** Forgets a process started by `spawnAgent`: what the helper still reports about it is dropped. */
  release(id: number): void {
    this.lostHandlers.delete(id)
    const unconsumed = this.unconsumed.get(id)
    if (unconsumed !== undefined) {
      this.unconsumed.delete(id)
      this.unconsumedTotal -= unconsumed
      this.flow()
    }
    if (!this.pending.delete(id) || this.pending.size > 0) return
    if (this.state._tag === "Ready") this.ref(this.state.child, false)
  }

  private send(child: ChildProcess, request: object, receiver: Receiver): number {
    const id = ++this.nextId
    this.pending.set(id, receiver)
    if (this.pending.size === 1) this.ref(child, true)
    child.stdin!.write(`${JSON.stringify({ id, ...request })}\n`)
    return id
  }

  /**
   * Ends the helper (its standard input) and waits up to `ms` for it to exit, so this process reaps it
   * and counts its CPU time, and that of the processes it reaped, as its children's. Later commands
   * run in this process.
   */
  stop(ms = 2000): Promise<void> {
    const state = this.state
    if (state._tag === "Idle") this.state = { _tag: "Unavailable", reason: "the spawn helper is not used: stopped" }
    if (state._tag !== "Starting" && state._tag !== "Ready") return Promise.resolve()
    const child = state.child
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      const timer = setTimeout(resolve, ms)
      child.once("exit", () => {
        clearTimeout(timer)
        resolve()
      })
    })
    this.fail("stopped")
    return exited
  }

  private launch(): void {
    const env = { ...process.env }
    // The helper is plain JavaScript: preloads meant for this process (test runners, profilers) stay out.
    delete env.NODE_OPTIONS
    let child: ChildProcess
    try {
      // No V8 worker threads (`--single-threaded`; its heap is small): measured cheaper per process it
      // starts, for it and for its parent (the floor of `pnpm bench spawn`, 8 alternating pairs: tree
      // CPU 1.94 -> 1.79 ms per process, the pool process's own 0.30 -> 0.26 ms).
      child = spawn(this.node, ["--single-threaded", "-e", HELPER_SOURCE], {
        stdio: ["pipe", "pipe", "inherit"],
        env,
        windowsHide: true
      })
    } catch (error) {
      this.fail(`it could not be started: ${(error as Error).message}`)
      return
    }
    this.state = { _tag: "Starting", child }
    child.on("error", (error) => this.fail(`it could not be started: ${error.message}`))
    child.on("exit", (code, signal) => this.fail(`it exited (${signal ?? `code ${code}`})`))
    child.stdin!.on("error", () => undefined)
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => this.receive(child, chunk))
    child.unref()
    this.ref(child, false)
  }

  private receive(child: ChildProcess, chunk: string): void {
    this.buffered += chunk
    for (let end = this.buffered.indexOf("\n"); end !== -1; end = this.buffered.indexOf("\n")) {
      const line = this.buffered.slice(0, end)
      this.buffered = this.buffered.slice(end + 1)
      let message: Reply | AgentMessage | { readonly ready: number }
      try {
        message = JSON.parse(line)
      } catch {
        child.kill("SIGKILL")
        this.fail(`it wrote something that is not a reply: ${line.slice(0, 80)}`)
        return
      }
      if ("ready" in message) {
        if (this.state._tag === "Starting") this.state = { _tag: "Ready", child, pid: message.ready }
        this.settled.resolve(message.ready)
        continue
      }
      const receiver = this.pending.get(message.id)
      if (receiver === undefined || !receiver(message)) continue
      this.release(message.id)
    }
  }

  private fail(reason: string): void {
    if (this.state._tag === "Unavailable") return
    const child = this.state._tag === "Idle" ? undefined : this.state.child
    this.state = { _tag: "Unavailable", reason: `the spawn helper is not used: ${reason}` }
    this.settled.resolve(undefined)
    const lost = [...this.pending]
    const lostHandlers = new Map(this.lostHandlers)
    this.unconsumed.clear()
    this.unconsumedTotal = 0
    this.pending.clear()
    this.lostHandlers.clear()
    if (child !== undefined) {
      this.ref(child, false)
      child.stdin?.destroy()
    }
    const error = { code: "EHELPER", signal: null, message: `the spawn helper died while the command ran (${reason})` }
    for (const [id, receiver] of lost) {
      const onLost = lostHandlers.get(id)
      if (onLost !== undefined) onLost(error)
      else receiver({ id, error, stdout: "", stderr: "" })
    }
  }

  /** The helper's pipes keep this process alive only while a command runs through it. */
  private ref(child: ChildProcess, on: boolean): void {
    for (const stream of [child.stdin, child.stdout] as const) {
      const socket = stream as unknown as { ref?: () => void; unref?: () => void } | null
      if (on) socket?.ref?.()
      else socket?.unref?.()
    }
  }
}

/**
 * `helper.exec` as an effect: `onExit` turns the command's outcome into the result. Interrupting it
 * stops the command ({@link StopGrace}) and completes only once the command has exited, so nothing
 * it does (a git command writing its index and removing its lock) outlives the interruption.
 */
export const execCommand = <A, E>(
  helper: SpawnHelper,
  request: ExecRequest,
  onExit: (error: ExecError | null, stdout: string, stderr: string) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.callback<A, E>((resume, signal) => {
    let exited = false
    let gone: (() => void) | undefined
    helper.exec(request, signal, (error, stdout, stderr) => {
      exited = true
      if (gone === undefined) resume(onExit(error, stdout, stderr))
      else gone()
    })
    return Effect.callback<void>((resumeGone) => {
      if (exited) resumeGone(Effect.void)
      else gone = () => resumeGone(Effect.void)
    })
  })

let shared: SpawnHelper | undefined

/** The helper of this process (of this thread, in a worker thread). */
export const sharedHelper = (): SpawnHelper =>
  (shared ??= new SpawnHelper({ enabled: process.env.CORRAL_SPAWN_HELPER !== "0" }))
