import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs"
import { readFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { afterAll, assert, describe, it } from "@effect/vitest"
import {
  type AgentRequest,
  type ExecError,
  type ExecRequest,
  SpawnHelper,
  type StopGrace
} from "../../src/internal/spawnHelper.ts"
import { isAlive } from "../support/processes.ts"
import { finishingSoon, slowToStop } from "../support/stoppableScripts.ts"

const dir = realpathSync(mkdtempSync(join(tmpdir(), "corral-spawn-helper-")))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const fixture = new URL("../fixtures/spawnHelperParent.ts", import.meta.url).pathname

interface Outcome {
  readonly error: ExecError | null
  readonly stdout: string
  readonly stderr: string
}

const exec = (helper: SpawnHelper, request: Partial<ExecRequest>, signal?: AbortSignal) =>
  new Promise<Outcome>((resolve) =>
    helper.exec(
      { file: "sh", args: [], cwd: dir, env: { PATH: process.env.PATH }, maxBuffer: 1 << 20, ...request },
      signal,
      (error, stdout, stderr) => resolve({ error, stdout, stderr })
    )
  )

let fifos = 0

/** A new named pipe in the test folder. */
const fifo = (name: string): string => {
  const file = join(dir, `${name}-${fifos++}`)
  execFileSync("mkfifo", [file])
  return file
}

/** What a command writes to `file` (a named pipe): resolves once the command closed it. */
const readPipe = (file: string): Promise<string> => readFile(file, "utf8")

/**
 * Resolves when every process holding the write end of `stream` has exited (end of file): no
 * polling, and no deadline but the test's own.
 */
const closed = (stream: NodeJS.ReadableStream): Promise<void> =>
  new Promise((resolve) => {
    stream.on("data", () => undefined)
    stream.once("end", () => resolve())
  })

/**
 * Starts a parent of the helper. Its standard error is a pipe of this test that the helper inherits
 * (`stdio: [.., .., "inherit"]` in `SpawnHelper`), so `gone` resolves once the parent and the helper
 * have both exited.
 */
const startParent = (mode: string): { child: ChildProcess; lines: AsyncIterator<string>; gone: Promise<void> } => {
  const child = spawn(process.execPath, [fixture, mode], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  child.stderr!.pipe(process.stderr, { end: false })
  const gone = closed(child.stderr!)
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  return { child, lines, gone }
}

const nextMessage = async (lines: AsyncIterator<string>) => {
  const line = await lines.next()
  assert.isFalse(line.done, "the parent wrote nothing")
  return JSON.parse(line.value as string) as { helper: number | undefined; out: string }
}

const exited = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once("exit", (code) => resolve(code))
  })

interface AgentRun {
  readonly id: number | undefined
  readonly started: Promise<{ readonly pid: number | undefined; readonly error: ExecError | undefined }>
  readonly events: Array<string>
  /** Resolves when the helper reports the exit. */
  readonly exited: Promise<void>
  readonly done: Promise<void>
}

/** Starts a process through `spawnAgent` and records what the helper reports, in order. */
const spawnAgent = (helper: SpawnHelper, request: Partial<AgentRequest>): AgentRun => {
  const started = Promise.withResolvers<{ pid: number | undefined; error: ExecError | undefined }>()
  const done = Promise.withResolvers<void>()
  const exited = Promise.withResolvers<void>()
  const events: Array<string> = []
  let open = 3
  const closed = () => {
    open -= 1
    if (open === 0) done.resolve()
  }
  const id = helper.spawnAgent(
    { file: "sh", args: [], cwd: dir, env: { PATH: process.env.PATH }, ...request },
    {
      started: (pid, error) => {
        started.resolve({ pid, error })
        if (pid === undefined) done.resolve()
      },
      data: (fd, chunk) => events.push(`${fd}:${chunk.toString()}`),
      end: (fd) => {
        events.push(`end ${fd}`)
        closed()
      },
      exit: (code, signal) => {
        events.push(`exit ${code ?? signal}`)
        exited.resolve()
        closed()
      },
      lost: (error) => {
        events.push(`lost ${error.code}`)
        done.resolve()
      }
    }
  )
  return { id, started: started.promise, events, exited: exited.promise, done: done.promise }
}

const sessionOf = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3])
}

describe("SpawnHelper.spawnAgent", () => {
  it("starts a process in a session of its own and reports its pid, output and exit", async () => {
    const helper = new SpawnHelper()
    const helperPid = (await helper.ready())!
    const run = spawnAgent(helper, {
      args: ["-c", "echo out $PPID; echo err >&2; sleep 0.2; exit 3"]
    })
    const { pid } = await run.started
    assert.isDefined(pid)
    assert.strictEqual(sessionOf(pid!), pid, "the process leads a new session (and process group)")
    await run.done
    helper.release(run.id!)
    assert.includeMembers(run.events, [`1:out ${helperPid}\n`, "2:err\n", "end 1", "end 2", "exit 3"])
  })

  it("reports a signal and a missing executable", async () => {
    const helper = new SpawnHelper()
    await helper.ready()
    const killed = spawnAgent(helper, { args: ["-c", "kill -9 $$"] })
    await killed.done
    assert.include(killed.events, "exit SIGKILL")
    const missing = spawnAgent(helper, { file: join(dir, "no-such-program") })
    const started = await missing.started
    assert.isUndefined(started.pid)
    assert.strictEqual(started.error?.code, "ENOENT")
  })

  it("reports the exit at once while a process it started holds the outputs open, and their ends later", async () => {
    const helper = new SpawnHelper()
    await helper.ready()
    const run = spawnAgent(helper, { args: ["-c", "sleep 1000 & exit 0"] })
    const { pid } = await run.started
    await run.exited
    assert.deepStrictEqual(run.events, ["exit 0"], "the outputs stay open in the background sleep")
    process.kill(-pid!, "SIGKILL")
    await run.done
    helper.release(run.id!)
    assert.sameMembers(run.events.slice(1), ["end 1", "end 2"])
  })

  it("is not used before the helper is ready or when it is turned off", () => {
    assert.isUndefined(spawnAgent(new SpawnHelper({ enabled: false }), {}).id)
  })

  it("reports a running process as lost when the helper dies", async () => {
    const doomed = new SpawnHelper()
    const helperPid = (await doomed.ready())!
    const run = spawnAgent(doomed, { args: ["-c", "exec sleep 1000"] })
    const { pid } = await run.started
    process.kill(helperPid, "SIGKILL")
    await run.done
    assert.include(run.events, "lost EHELPER")
    process.kill(-pid!, "SIGKILL")
  })
})

describe("SpawnHelper", () => {
  const helper = new SpawnHelper()

  it("runs commands in its own process with the exit code, output, cwd, environment and input", async () => {
    const pid = await helper.ready()
    assert.isDefined(pid)
    assert.notStrictEqual(pid, process.pid)
    const out = await exec(helper, {
      args: ["-c", 'echo "$PPID $(pwd) $GREETING"; cat; echo oops >&2; exit 3'],
      env: { PATH: process.env.PATH, GREETING: "hello" },
      input: "from stdin\n"
    })
    assert.deepStrictEqual(out.error?.code, 3)
    assert.strictEqual(out.stdout, `${pid} ${dir} hello\nfrom stdin\n`)
    assert.strictEqual(out.stderr, "oops\n")
    const ok = await exec(helper, { args: ["-c", "printf 'a\\nb\\né'"] })
    assert.isNull(ok.error)
    assert.strictEqual(ok.stdout, "a\nb\né")
  })

  it("reports a missing executable, a missing folder and a signal like execFile", async () => {
    await helper.ready()
    assert.strictEqual((await exec(helper, { file: "corral-no-such-program" })).error?.code, "ENOENT")
    assert.strictEqual((await exec(helper, { args: ["-c", "true"], cwd: join(dir, "missing") })).error?.code, "ENOENT")
    const killed = await exec(helper, { args: ["-c", "kill -KILL $$"] })
    assert.strictEqual(killed.error?.signal, "SIGKILL")
    assert.strictEqual(helper.pid !== undefined, true)
  })

  const ways = [
    ["through the helper", (grace: StopGrace) => new SpawnHelper({ grace })],
    ["in this process", (grace: StopGrace) => new SpawnHelper({ enabled: false, grace })]
  ] as const

  /** Runs `script`, aborts it once it runs, and returns what the callback reported and the script's pid. */
  const abortOnceRunning = async (
    make: (grace: StopGrace) => SpawnHelper,
    grace: StopGrace,
    started: { readonly script: string; readonly pid: Promise<number> }
  ) => {
    const runner = make(grace)
    await runner.ready()
    const controller = new AbortController()
    const done = exec(runner, { args: ["-c", started.script] }, controller.signal)
    const pid = await started.pid
    controller.abort()
    const out = await done
    await runner.stop()
    return { out, pid }
  }

  it.each(ways)(
    "lets an aborted command finish within the grace, unsignalled, and then calls back (%s)",
    async (_, make) => {
      const script = finishingSoon(dir)
      const { out, pid } = await abortOnceRunning(make, { finishMs: 5000, killMs: 5000 }, script)
      assert.strictEqual(out.error?.code, "ABORT_ERR")
      assert.isFalse(isAlive(pid), "the command still runs after its callback")
      assert.strictEqual(readFileSync(script.outcome, "utf8"), "finished\n")
    }
  )

  it.each(ways)("sends SIGTERM after the grace and calls back once the command has exited (%s)", async (_, make) => {
    const script = slowToStop(dir)
    const { out, pid } = await abortOnceRunning(make, { finishMs: 100, killMs: 5000 }, script)
    assert.strictEqual(out.error?.code, "ABORT_ERR")
    assert.isFalse(isAlive(pid), "the command still runs after its callback")
    assert.strictEqual(readFileSync(script.outcome, "utf8"), "cleaned\n")
  })

  it.each(ways)("sends SIGKILL to an aborted command that outlives SIGTERM (%s)", async (_, make) => {
    const pidPipe = fifo("stubborn.pid")
    const script = {
      script: `trap '' TERM; echo $$ > ${pidPipe}; exec sleep 1000`,
      pid: readPipe(pidPipe).then(Number)
    }
    const { out, pid } = await abortOnceRunning(make, { finishMs: 100, killMs: 200 }, script)
    assert.strictEqual(out.error?.code, "ABORT_ERR")
    assert.isFalse(isAlive(pid))
  })

  it("waits for an aborted command whose helper dies during the grace, and stops it itself", async () => {
    const runner = new SpawnHelper({ grace: { finishMs: 100, killMs: 5000 } })
    await runner.ready()
    const pidPipe = fifo("orphan.pid")
    const termed = fifo("orphan.termed")
    const outcome = join(dir, `orphan-${fifos}.outcome`)
    // On SIGTERM (the helper's, after its grace) it says so, then works 300 ms more before it exits.
    const script = `trap 'kill $!; echo > ${termed}; sleep 0.3; echo finished >> ${outcome}; exit 143' TERM; echo $$ > ${pidPipe}; sleep 1000 & wait`
    const controller = new AbortController()
    const done = exec(runner, { args: ["-c", script] }, controller.signal)
    const pid = Number(await readPipe(pidPipe))
    controller.abort()
    await readPipe(termed)
    process.kill(runner.pid!, "SIGKILL")
    const out = await done
    assert.strictEqual(out.error?.code, "ABORT_ERR")
    assert.isFalse(isAlive(pid), "the command still runs after its callback")
    assert.strictEqual(readFileSync(outcome, "utf8"), "finished\n")
  })

  it("falls back to this process when the helper cannot start, and says why", async () => {
    const broken = new SpawnHelper({ node: join(dir, "no-such-node") })
    assert.isUndefined(await broken.ready())
    assert.match(broken.unavailable ?? "", /could not be started/)
    const out = await exec(broken, { args: ["-c", "echo $PPID"] })
    assert.strictEqual(out.stdout.trim(), String(process.pid))
  })

  it("is not used when turned off", async () => {
    const off = new SpawnHelper({ enabled: false })
    assert.isUndefined(await off.ready())
    assert.match(off.unavailable ?? "", /CORRAL_SPAWN_HELPER=0/)
    assert.strictEqual((await exec(off, { args: ["-c", "echo $PPID"] })).stdout.trim(), String(process.pid))
  })

  it("fails a command in flight when the helper dies, and runs later commands itself", async () => {
    const doomed = new SpawnHelper()
    const pid = (await doomed.ready())!
    const pidPipe = fifo("orphan.pid")
    const inFlight = exec(doomed, { args: ["-c", `echo $$ > ${pidPipe}; exec sleep 1000`] })
    const orphan = Number(await readPipe(pidPipe))
    assert.isTrue(orphan > 0)
    process.kill(pid, "SIGKILL")
    const lost = await inFlight
    assert.strictEqual(lost.error?.code, "EHELPER")
    assert.match(doomed.unavailable ?? "", /exited/)
    assert.strictEqual((await exec(doomed, { args: ["-c", "echo $PPID"] })).stdout.trim(), String(process.pid))
    process.kill(orphan, "SIGKILL")
  })

  it("starts before any command when asked, and its first command runs in it", async () => {
    const early = new SpawnHelper()
    early.start()
    assert.isUndefined(early.unavailable)
    const pid = await early.ready()
    assert.isDefined(pid)
    assert.strictEqual((await exec(early, { args: ["-c", "echo $PPID"] })).stdout.trim(), String(pid))
    await early.stop()
  })

  it("started and never used, does not keep its parent alive and leaves with it", async () => {
    const { child, lines, gone } = startParent("start")
    const message = await nextMessage(lines)
    assert.strictEqual(message.out, "started")
    assert.isNumber(message.helper)
    assert.strictEqual(await exited(child), 0)
    await gone
  })

  it("does not keep its parent alive", async () => {
    const { child, lines, gone } = startParent("exit")
    const message = await nextMessage(lines)
    assert.strictEqual(message.out, "once")
    assert.strictEqual(await exited(child), 0)
    await gone
  })

  it("dies with its parent on kill -9", async () => {
    const { child, lines, gone } = startParent("hold")
    const message = await nextMessage(lines)
    assert.strictEqual(message.out, "held")
    assert.isTrue(isAlive(message.helper!))
    assert.strictEqual(readlinkSync(`/proc/${message.helper}/fd/2`), readlinkSync(`/proc/${child.pid}/fd/2`))
    process.kill(child.pid!, "SIGKILL")
    await exited(child)
    await gone
  })

  it("survives a Ctrl-C to the whole group, serves the parent's cleanup, and leaves with the parent", async () => {
    const { child, lines, gone } = startParent("sigint")
    const armed = await nextMessage(lines)
    assert.strictEqual(armed.out, "armed")
    process.kill(-child.pid!, "SIGINT")
    const after = await nextMessage(lines)
    assert.deepStrictEqual(after, { helper: armed.helper, out: "after-sigint" })
    assert.strictEqual(await exited(child), 0)
    await gone
  })
})
