import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { getPriority, tmpdir } from "node:os"
import { join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Cause, Deferred, type Duration, Effect, Exit, Fiber, Option } from "effect"
import { makePlan, wrapArgv } from "../src/internal/processPlan.ts"
import { setThroughHelper } from "../src/internal/processSpawn.ts"
import { sharedHelper } from "../src/internal/spawnHelper.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import { isAlive } from "./support/processes.ts"

const NODE = process.execPath
const dir = mkdtempSync(join(tmpdir(), "corral-process-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const run = (spec: ProcessRunner.ProcessSpec) => ProcessRunner.run(spec).pipe(Effect.provide(NodeServices.layer))
const node = (script: string, spec: Partial<ProcessRunner.ProcessSpec> = {}) =>
  run({ command: NODE, args: ["-e", script], ...spec })
const sh = (script: string, spec: Partial<ProcessRunner.ProcessSpec> = {}) =>
  run({ command: script, shell: true, ...spec })
const failed = <A, R>(effect: Effect.Effect<A, ProcessRunner.ProcessFailed, R>) => Effect.flip(effect)

const TREE = "sleep 1000 & echo $!; sleep 1000 & echo $!; wait"

const spawnTree = (spec: Partial<ProcessRunner.ProcessSpec> & { readonly timeout?: Duration.Input } = {}) =>
  Effect.gen(function* () {
    const pids: Array<number> = []
    const started = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkChild(
      sh(spec.command ?? TREE, {
        ...spec,
        onLine: ({ text }) => {
          pids.push(Number(text))
          if (pids.length === 2) Deferred.doneUnsafe(started, Exit.void)
        }
      }).pipe(Effect.timeout(spec.timeout ?? "1 minute")),
      { startImmediately: true }
    )
    yield* Effect.raceFirst(
      Deferred.await(started),
      Effect.andThen(Fiber.await(fiber), Effect.die(new Error(`the tree ended before it printed its pids: ${pids}`)))
    )
    return { fiber, pids }
  })

// These processes start through the spawn helper, as a run's do once it is up (ProcessRunner.interrupt
// and ProcessLimits cover the other way).
beforeAll(async () => {
  setThroughHelper(true)
  assert.isDefined(await sharedHelper().ready(), "the spawn helper did not start")
})

describe("ProcessRunner", () => {
  // A script whose only work is `await`ing a process agent: what keeps Node running until the
  // process has exited is the process itself. The command closes its output first and exits after,
  // so nothing else (no pipe, no helper request) is left to keep the event loop alive meanwhile.
  it("a script that only awaits a process agent stays alive until the process exits, with or without the spawn helper", () => {
    const fixture = new URL("fixtures/awaitedProcess.ts", import.meta.url).pathname
    for (const helper of ["0", "1"]) {
      const child = spawnSync(NODE, [fixture, "exec >/dev/null 2>&1 </dev/null; sleep 0.3"], {
        env: { ...process.env, CORRAL_SPAWN_HELPER: helper, TMPDIR: dir },
        encoding: "utf8"
      })
      assert.strictEqual(child.stdout, "exit 0\n", `CORRAL_SPAWN_HELPER=${helper}: ${child.stderr}`)
      assert.strictEqual(child.status, 0, child.stderr)
    }
  })

  it.live("succeeds on exit 0 with tail and usage", () =>
    Effect.gen(function* () {
      const result = yield* node("console.log('one'); console.error('two'); console.log('three')")
      assert.strictEqual(result.exitCode, 0)
      assert.sameMembers([...result.tail], ["one", "two", "three"])
      assert.isAtLeast(result.usage.cpuUserMs, 0)
      assert.isAbove(result.durationMs, 0)
    })
  )

  it.live("measures CPU time and peak RSS of the tree from /proc samples", () =>
    Effect.gen(function* () {
      const result = yield* sh(
        `${NODE} -e "const b = Buffer.alloc(80*1024*1024, 1); while (process.cpuUsage().user < 400000) {}"; echo done`
      )
      const { cpuUserMs, cpuSystemMs, peakRssMb } = result.usage
      yield* Effect.log(
        `usage: user ${cpuUserMs} ms, system ${cpuSystemMs} ms, peak ${peakRssMb} MB, ${result.durationMs} ms`
      )
      assert.isAtLeast(cpuUserMs + cpuSystemMs, 200)
      assert.isAtLeast(peakRssMb, 80)
    })
  )

  it.live("fails on a non-zero exit with the last stderr line in the message", () =>
    Effect.gen(function* () {
      const error = yield* failed(
        node("console.log('compiling'); console.error('error TS2304: nope'); process.exit(2)", { name: "build" })
      )
      assert.strictEqual(error.reason, "exit")
      assert.strictEqual(error.exitCode, 2)
      assert.isFalse(error.crashed)
      assert.deepStrictEqual(error.tail, ["compiling", "error TS2304: nope"])
      assert.strictEqual(error.message, 'process "build" exited with code 2: error TS2304: nope')
    })
  )

  it.live("reports a missing command as a spawn failure", () =>
    Effect.gen(function* () {
      const error = yield* failed(run({ command: "corral-no-such-command-xyz" }))
      assert.strictEqual(error.reason, "spawn")
      assert.include(error.message, "command not found")
    })
  )

  it.live("limits and killGrace it cannot use: a spawn failure naming the field, before anything starts", () =>
    Effect.gen(function* () {
      const marker = join(dir, "bad-limits-started")
      const cases: ReadonlyArray<readonly [Partial<ProcessRunner.ProcessSpec>, string]> = [
        [{ limits: { memoryMb: -5 } }, "limits.memoryMb: must be a whole number of at least 1, got -5"],
        [
          { limits: { cpuPercent: "50" as never } },
          'limits.cpuPercent: must be a whole number from 1 to 100, got "50"'
        ],
        [{ limits: { cpuPercent: 0 } }, "limits.cpuPercent: must be a whole number from 1 to 100, got 0"],
        [{ limits: { nice: 1.5 } }, "limits.nice: must be a whole number from -20 to 19, got 1.5"],
        [
          { limits: { maxOutputBytes: Number.NaN } },
          "limits.maxOutputBytes: must be a whole number of at least 1, got NaN"
        ],
        [
          { killGrace: "abc" as never },
          'killGrace: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "abc"'
        ],
        [{ killGrace: -5 }, "killGrace: must not be negative, got -5"],
        [{ killGrace: { seconds: true } as never }, "killGrace: duration field seconds must be a number, got boolean"],
        [
          { killGrace: { milliseconds: "5" } as never },
          "killGrace: duration field milliseconds must be a number, got string"
        ],
        [
          { killGrace: {} },
          'killGrace: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}'
        ]
      ]
      for (const [spec, detail] of cases) {
        const error = yield* failed(sh(`touch ${marker}`, spec))
        assert.strictEqual(error.reason, "spawn", detail)
        assert.include(error.message, detail)
      }
      assert.isFalse(existsSync(marker), "no process started")
    })
  )

  it.live("a killGrace past node's longest timer (Infinity, 30 days) sets no timer node cuts to 1 ms", () =>
    Effect.gen(function* () {
      const warnings: Array<string> = []
      const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
      process.on("warning", onWarning)
      yield* Effect.gen(function* () {
        for (const killGrace of [Number.POSITIVE_INFINITY, "30 days"] as const) {
          for (let i = 0; i < 3; i++) {
            // the group's SIGTERM once the shell has exited ends the sleeper long before 5 s at any load
            // (a 0.4 s sleeper printed "late" once at load 8)
            const result = yield* sh("sh -c 'sleep 5; echo late' & echo early", { killGrace })
            assert.deepStrictEqual(result.tail, ["early"])
          }
        }
        // node emits warnings on the next tick
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      }).pipe(Effect.ensuring(Effect.sync(() => process.off("warning", onWarning))))
      assert.deepStrictEqual(
        warnings.filter((w) => w.startsWith("TimeoutOverflowWarning")),
        []
      )
    })
  )

  it.live("a SIGSEGV or SIGKILL is a crash", () =>
    Effect.gen(function* () {
      const segv = yield* failed(sh("echo about to crash >&2; kill -SEGV $$"))
      assert.strictEqual(segv.reason, "signal")
      assert.strictEqual(segv.signal, "SIGSEGV")
      assert.isTrue(segv.crashed)
      assert.include(segv.message, "killed by SIGSEGV (crashed): about to crash")
      const kill = yield* failed(node("process.kill(process.pid, 'SIGKILL')"))
      assert.strictEqual(kill.signal, "SIGKILL")
      assert.isTrue(kill.crashed)
    })
  )

  it.live("a timeout terminates the whole tree", () =>
    Effect.gen(function* () {
      // 3 s: the tree is up well before it at any load (its pids came 400 ms after the fork at load 8)
      const { fiber, pids } = yield* spawnTree({ timeout: "3 seconds" })
      assert.isTrue(pids.every(isAlive))
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit) && Option.exists(Cause.findErrorOption(exit.cause), Cause.isTimeoutError))
      assert.isFalse(pids.some(isAlive))
    })
  )

  it.live("interruption kills grandchildren, escalating to SIGKILL after killGrace", () =>
    Effect.gen(function* () {
      // a grace far longer than any stall of a loaded machine: only an escalation would wait for it
      const polite = yield* spawnTree({ killGrace: "60 seconds" })
      let started = Date.now()
      yield* Fiber.interrupt(polite.fiber)
      const politeMs = Date.now() - started
      assert.isFalse(polite.pids.some(isAlive))
      const stubborn = yield* spawnTree({ command: `trap '' TERM; ${TREE}`, killGrace: "300 millis" })
      started = Date.now()
      yield* Fiber.interrupt(stubborn.fiber)
      const stubbornMs = Date.now() - started
      assert.isFalse(stubborn.pids.some(isAlive))
      // below its 60 s grace: SIGTERM ended the polite tree, no escalation was needed
      assert.isBelow(politeMs, 60_000)
      assert.isAtLeast(stubbornMs, 250)
      // the stubborn tree's SIGKILL came after its own 300 ms grace, not after some longer wait
      assert.isBelow(stubbornMs, 5000)
      yield* Effect.log(`tree kill: SIGTERM ${politeMs} ms, SIGTERM-ignoring tree ${stubbornMs} ms`)
    })
  )

  it.live("cleans up background children left by a successful command", () =>
    Effect.gen(function* () {
      const result = yield* sh("sleep 1000 & echo $!; echo done")
      const pid = Number(result.tail[0])
      assert.strictEqual(result.tail[1], "done")
      assert.isFalse(isAlive(pid))
    })
  )

  it.live("enforces the memory limit over the tree", () =>
    Effect.gen(function* () {
      // the hog never exits by itself: a failure is the watchdog's doing, however slow the machine
      const error = yield* failed(
        node(
          "const k=[]; let i=0; const t=setInterval(()=>{ k.push(Buffer.alloc(20*1024*1024, 1)); if(++i===15) clearInterval(t) }, 20); setInterval(()=>{}, 60000)",
          { name: "hog", limits: { memoryMb: 100 } }
        )
      )
      assert.strictEqual(error.reason, "limit")
      assert.strictEqual(error.limit, "memoryMb")
      assert.isAbove(error.peakRssMb ?? 0, 100)
      assert.match(error.message, /^process "hog" exceeded its memory limit \(100 MB, peak \d+(\.\d)? MB\)$/)
    })
  )

  it.live(
    "keeps sampling after the first 2 seconds: a group that grows late is measured, and killed over its limit",
    () =>
      Effect.gen(function* () {
        // Past 2 s a group without a memory limit is sampled every 500 ms, one with a limit every 100 ms.
        const late =
          "setTimeout(() => { globalThis.k = Buffer.alloc(90*1024*1024, 1); setTimeout(() => {}, 1500) }, 2300)"
        const measured = yield* sh(`${NODE} -e "${late}"`)
        assert.isAtLeast(measured.usage.peakRssMb, 90)
        const error = yield* failed(
          node(
            "setTimeout(() => { const k=[]; const t=setInterval(() => { k.push(Buffer.alloc(20*1024*1024, 1)); if (k.length === 30) clearInterval(t) }, 20) }, 2300); setInterval(()=>{}, 60000)",
            { name: "late-hog", limits: { memoryMb: 100 } }
          )
        )
        assert.strictEqual(error.limit, "memoryMb")
      })
  )

  it.live("enforces cpuSeconds with RLIMIT_CPU", () =>
    Effect.gen(function* () {
      const error = yield* failed(node("for(;;){}", { limits: { cpuSeconds: 1 } }))
      assert.strictEqual(error.limit, "cpuSeconds")
      assert.include(["SIGXCPU", "SIGKILL"], error.signal)
      assert.include(error.message, "CPU time limit (1 s")
    })
  )

  it.live("enforces fileSizeMb with RLIMIT_FSIZE (signal, shell status or EFBIG)", () =>
    Effect.gen(function* () {
      const limits = { fileSizeMb: 1 }
      const direct = yield* failed(sh("exec head -c 3000000 /dev/zero > big.direct.bin", { cwd: dir, limits }))
      assert.strictEqual(direct.signal, "SIGXFSZ")
      const viaShell = yield* failed(sh("head -c 3000000 /dev/zero > big.sh.bin", { cwd: dir, limits }))
      const viaNode = yield* failed(
        node("require('fs').writeFileSync('big.node.bin', Buffer.alloc(3*1024*1024))", { cwd: dir, limits })
      )
      for (const error of [direct, viaShell, viaNode]) {
        assert.strictEqual(error.limit, "fileSizeMb")
        assert.include(error.message, "file size limit (1 MB")
      }
    })
  )

  it.live("applies rlimits and nice with prlimit and with the sh ulimit fallback", () =>
    Effect.gen(function* () {
      const limits = { cpuSeconds: 5, fileSizeMb: 2, maxProcesses: 500, nice: 5 }
      const viaPrlimit = yield* run({
        command: "sh",
        args: ["-c", "cat /proc/self/limits; cut -d' ' -f19 /proc/self/stat"],
        limits
      })
      const [cmd, ...args] = wrapArgv(
        ["/bin/sh", "-c", "cat /proc/self/limits; cut -d' ' -f19 /proc/self/stat"],
        limits,
        {
          prlimit: undefined,
          nice: "/usr/bin/nice"
        }
      )
      const viaUlimit = yield* run({ command: cmd, args })
      for (const result of [viaPrlimit, viaUlimit]) {
        const text = result.tail.join("\n")
        assert.match(text, /Max cpu time\s+5\s+6\s+seconds/)
        assert.match(text, /Max file size\s+2097152\s+2097152\s+bytes/)
        assert.match(text, /Max processes\s+500\s+500\s+processes/)
        assert.strictEqual(result.tail.at(-1), String(Math.min(19, getPriority() + 5)), "relative to ours")
      }
    })
  )

  it("warns when nice cannot be applied, and runs the program without it", () => {
    const planned = makePlan(
      { command: "sh", args: ["-c", "true"], limits: { nice: 5 } },
      {
        prlimit: undefined,
        nice: undefined
      }
    )
    assert.strictEqual(planned._tag, "Plan")
    if (planned._tag !== "Plan") return
    assert.deepStrictEqual(planned.plan.warnings, [
      'nice limit of process "sh" is not applied: no `nice` executable on PATH'
    ])
    assert.match(planned.plan.argv[0], /\/sh$/)
    const applied = makePlan({ command: "sh", limits: { nice: 5 } }, { prlimit: undefined, nice: "/usr/bin/nice" })
    assert.deepStrictEqual(applied._tag === "Plan" ? applied.plan.warnings : undefined, [])
  })

  it.live("enforces maxOutputBytes", () =>
    Effect.gen(function* () {
      const error = yield* failed(
        node("setInterval(() => console.log('x'.repeat(1000)), 1)", { limits: { maxOutputBytes: 20_000 } })
      )
      assert.strictEqual(error.limit, "maxOutputBytes")
      assert.include(error.message, "output limit (20000 bytes)")
      assert.isAtMost(error.tail.join("\n").length, 20_000)
    })
  )

  it.live("captures 200k lines to the log file without loss", () =>
    Effect.gen(function* () {
      const logDir = join(dir, "logs")
      const result = yield* node(
        "let s=''; for (let i=0;i<200000;i++){ s+='line '+i+'\\n'; if (s.length>65536){ process.stdout.write(s); s='' } } process.stdout.write(s); console.error('bye')",
        { name: "loud/one", logDir }
      )
      assert.strictEqual(result.logPath, join(logDir, "loud_one.log"))
      const lines = readFileSync(result.logPath!, "utf8").split("\n")
      const out = lines.filter((l) => l.startsWith("[out] "))
      assert.strictEqual(out.length, 200_000)
      assert.strictEqual(out[199_999], "[out] line 199999")
      assert.include(lines, "[err] bye")
      assert.match(lines[0]!, /^\[corral\] \$ /)
      assert.strictEqual(result.tail.length, 50)
    })
  )

  it.live("the log header shows a multi-line shell command as written", () =>
    Effect.gen(function* () {
      const logDir = join(dir, "header-logs")
      const result = yield* run({ name: "block", command: "echo one\necho two\n", shell: true, logDir })
      const lines = readFileSync(result.logPath!, "utf8").split("\n")
      assert.deepStrictEqual(lines.slice(0, 2), ["[corral] $ echo one", "echo two"])
    })
  )

  it.live("redacts secret values in tail, message and log", () =>
    Effect.gen(function* () {
      const error = yield* failed(
        node(
          "console.log('token=' + process.env.API_TOKEN); console.error('bad ' + process.env.API_TOKEN); process.exit(1)",
          {
            env: { API_TOKEN: "s3cr3t-V4lue" },
            secrets: ["API_TOKEN"],
            logDir: join(dir, "logs"),
            name: "secret"
          }
        )
      )
      assert.deepStrictEqual(error.tail, ["token=***", "bad ***"])
      assert.include(error.message, "bad ***")
      const log = readFileSync(join(dir, "logs", "secret.log"), "utf8")
      assert.notInclude(log, "s3cr3t")
      assert.include(log, "[err] bad ***")
    })
  )

  it.live("throttles onLine to about 20 lines per second", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const result = yield* node("for (let i=0;i<1000;i++) console.log(i)", { onLine: (l) => seen.push(l.text) })
      assert.isAtLeast(seen.length, 20)
      assert.isAtMost(seen.length, 30)
      assert.strictEqual(seen.length + result.droppedLines, 1000)
      assert.strictEqual(seen[0], "0")
    })
  )

  it.live("passes a minimal environment unless inheritEnv", () =>
    Effect.gen(function* () {
      process.env.CORRAL_UNRELATED = "leak"
      const script = "console.log(process.env.CORRAL_UNRELATED ?? 'absent', process.env.MINE, typeof process.env.PATH)"
      const hygienic = yield* node(script, { env: { MINE: "declared" } })
      const inherited = yield* node(script, { env: { MINE: "declared" }, inheritEnv: true })
      delete process.env.CORRAL_UNRELATED
      assert.deepStrictEqual(hygienic.tail, ["absent declared string"])
      assert.deepStrictEqual(inherited.tail, ["leak declared string"])
    })
  )

  it.live("parses the result file on success and fails on an invalid one", () =>
    Effect.gen(function* () {
      const ok = yield* node("require('fs').writeFileSync('out.json', JSON.stringify({ answer: 42 }))", {
        cwd: dir,
        resultFile: "out.json"
      })
      assert.deepStrictEqual(ok.result, { answer: 42 })
      const bad = yield* failed(
        node("require('fs').writeFileSync('bad.json', '{nope')", { cwd: dir, resultFile: "bad.json" })
      )
      assert.strictEqual(bad.reason, "result")
      assert.include(bad.message, "bad.json")
    })
  )

  it.live("reads a result file of maxResultBytes; one byte more fails with the limit, naming file and size", () =>
    Effect.gen(function* () {
      const write = (file: string, bytes: number) =>
        `require('fs').writeFileSync('${file}', JSON.stringify('x'.repeat(${bytes - 2})))`
      const fits = yield* node(write("fits.json", 100), {
        cwd: dir,
        resultFile: "fits.json",
        limits: { maxResultBytes: 100 }
      })
      assert.strictEqual(fits.result, "x".repeat(98))
      const over = yield* failed(
        node(write("over.json", 101), { cwd: dir, resultFile: "over.json", limits: { maxResultBytes: 100 } })
      )
      assert.strictEqual(over.reason, "limit")
      assert.strictEqual(over.limit, "maxResultBytes")
      assert.match(over.message, /exceeded its result size limit \(100 bytes\): \S+over\.json is 101 bytes$/)
    })
  )

  it.live("a usage file growing past maxUsageBytes kills the running process and fails with the limit", () =>
    Effect.gen(function* () {
      const reported: Array<number> = []
      const warnings: Array<string> = []
      const line = '{"inputTokens":1}'
      const over = yield* failed(
        sh(`i=0; while [ $i -lt 100 ]; do echo '${line}' >> "$CORRAL_USAGE_FILE"; i=$((i+1)); done; sleep 30`, {
          limits: { maxUsageBytes: 1000 },
          onUsage: (usage) => reported.push(usage.inputTokens),
          onWarning: (message) => warnings.push(message)
        })
      )
      assert.strictEqual(over.reason, "limit")
      assert.strictEqual(over.limit, "maxUsageBytes")
      assert.isBelow(over.durationMs, 20_000, "killed before its sleep ended")
      const size = /exceeded its usage file limit \(1000 bytes\): \S+usage\.jsonl is (\d+) bytes$/.exec(over.message)
      assert.isAbove(Number(size?.[1]), 1000, over.message)
      assert.deepStrictEqual(warnings, [], "the line cut by the limit is not read as a line")
      assert.strictEqual(
        reported.reduce((sum, n) => sum + n, 0),
        Math.floor(1000 / (line.length + 1)),
        "the lines within the limit are counted"
      )
    })
  )

  it.live("isolates crashes: a SIGKILL and a memory breach do not affect the other processes", () =>
    Effect.gen(function* () {
      const exits = yield* Effect.all(
        [
          node("setTimeout(() => console.log('a'), 300)"),
          node("setTimeout(() => process.kill(process.pid, 'SIGKILL'), 100)"),
          node("const k=[]; setInterval(() => k.push(Buffer.alloc(30*1024*1024, 1)), 20)", {
            limits: { memoryMb: 100 }
          }),
          sh("sleep 0.3; echo c"),
          node("let x=0; for (let i=0;i<3e7;i++) x+=i; console.log('d')")
        ].map(Effect.exit),
        { concurrency: "unbounded" }
      )
      const reasons = exits.map((exit) =>
        Exit.isSuccess(exit)
          ? "ok"
          : Option.match(Cause.findErrorOption(exit.cause), {
              onNone: () => "other",
              onSome: (e) => e.limit ?? e.signal ?? e.reason
            })
      )
      assert.deepStrictEqual(reasons, ["ok", "SIGKILL", "memoryMb", "ok", "ok"])
      assert.isFalse(existsSync(join(dir, "never")))
    })
  )
})
