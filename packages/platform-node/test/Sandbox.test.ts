import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { basename, dirname, join } from "node:path"
import { NodeServices } from "@effect/platform-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Corral } from "@corral/core"
import { Deferred, Effect, Exit, Fiber } from "effect"
import * as ProcessAgent from "../src/ProcessAgent.ts"
import { setThroughHelper } from "../src/internal/processSpawn.ts"
import { sharedHelper } from "../src/internal/spawnHelper.ts"
import * as ProcessRunner from "../src/ProcessRunner.ts"
import * as Sandbox from "../src/Sandbox.ts"
import { liveGroupMembers } from "./support/processes.ts"

// With CI=true a machine without bubblewrap runs these tests and fails them; elsewhere they are skipped.
const enabled = Sandbox.supportUnsafe().available || process.env.CI === "true"

const root = mkdtempSync(join(tmpdir(), "corral-sandbox-"))
const ws = join(root, "ws")
const priv = join(root, "private")
const home = join(root, "home")
const other = join(root, "other")
const readable = join(root, "readable")
const writable = join(root, "writable")
// Escape targets on the host, named after this run's folder; no test writes them unsandboxed.
const hostTmpMarker = join("/tmp", `${basename(root)}-pwned`)
const usrMarker = join("/usr", `${basename(root)}-pwned`)
let server: net.Server
let port = 0
let connections = 0

beforeAll(async () => {
  for (const dir of [ws, priv, home, other, readable, writable]) mkdirSync(dir, { recursive: true })
  writeFileSync(join(other, "secret.txt"), "other-secret")
  mkdirSync(join(home, ".ssh"))
  writeFileSync(join(home, ".ssh", "id_ed25519"), "home-secret")
  writeFileSync(join(readable, "notes.txt"), "allowed-read")
  server = net.createServer((socket) => {
    connections++
    socket.end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as net.AddressInfo).port
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
  rmSync(root, { recursive: true, force: true })
  const left = [hostTmpMarker, usrMarker].filter((marker) => existsSync(marker))
  for (const marker of left) rmSync(marker, { force: true })
  assert.deepStrictEqual(left, [], "the escape targets outside the test's folder were never written")
})

const attempt = (name: string, command: string) =>
  `if ( ${command} ) >/dev/null 2>&1; then echo "${name}:ok"; else echo "${name}:blocked"; fi`

const write = (path: string) => `echo x > ${path}`

/** The escape attempts; `hostWrite` makes the attempts at the host's /tmp and /usr (the control only probes them). */
const attempts = (hostWrite: (path: string) => string = write) =>
  [
    attempt("own-write", `echo mine > ${ws}/own.txt`),
    attempt("private-write", `echo tmp > ${priv}/scratch`),
    attempt("read-other", `cat ${other}/secret.txt`),
    attempt("list-other", `ls ${other}`),
    attempt("read-home", `cat ${home}/.ssh/id_ed25519`),
    attempt("write-root", `echo x > ${root}/pwned`),
    attempt("write-tmp", hostWrite(hostTmpMarker)),
    attempt("write-usr", hostWrite(usrMarker)),
    attempt("allowed-read", `cat ${readable}/notes.txt`),
    attempt("allowed-read-write", `echo x > ${readable}/pwned`),
    attempt("allowed-write", `echo x > ${writable}/out.txt`),
    attempt("remount", "mount -o remount,rw /"),
    attempt("host-pid", `test -e /proc/${process.pid}`),
    attempt("tcp", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'`)
  ].join("\n")

const verdicts = (tail: ReadonlyArray<string>) =>
  Object.fromEntries(tail.filter((line) => line.includes(":")).map((line) => line.split(":") as [string, string]))

const runSandboxed = (sandbox: ProcessRunner.SandboxOptions) =>
  ProcessRunner.run({
    command: attempts(),
    shell: true,
    cwd: ws,
    env: { HOME: home },
    privateDirs: [priv],
    sandbox: { allow: { read: [readable], write: [writable] }, ...sandbox }
  }).pipe(Effect.provide(NodeServices.layer))

describe.skipIf(!enabled)("ProcessRunner sandbox (bubblewrap)", () => {
  it.live("every escape fails while the process's own writes succeed", () =>
    Effect.gen(function* () {
      const before = connections
      const result = yield* runSandboxed({ network: false })
      assert.deepStrictEqual(verdicts(result.tail), {
        "own-write": "ok",
        "private-write": "ok",
        "read-other": "blocked",
        "list-other": "blocked",
        "read-home": "blocked",
        "write-root": "blocked",
        "write-tmp": "blocked",
        "write-usr": "blocked",
        "allowed-read": "ok",
        "allowed-read-write": "blocked",
        "allowed-write": "ok",
        remount: "blocked",
        "host-pid": "blocked",
        tcp: "blocked"
      })
      assert.strictEqual(readFileSync(join(ws, "own.txt"), "utf8"), "mine\n")
      assert.strictEqual(readFileSync(join(writable, "out.txt"), "utf8"), "x\n")
      assert.strictEqual(connections, before)
      assert.isFalse(existsSync(hostTmpMarker))
      assert.isFalse(existsSync(usrMarker))
    })
  )

  it.live("allow.read of /: the file system read-only, the sandbox's own /dev, /proc and /tmp", () =>
    Effect.gen(function* () {
      // Outside /tmp, which the sandbox replaces with an empty folder (this checkout may be under it).
      const outside = mkdtempSync("/var/tmp/corral-sandbox-outside-")
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(outside, { recursive: true, force: true })))
      writeFileSync(join(outside, "package.json"), '{ "name": "outside" }\n')
      const result = yield* ProcessRunner.run({
        command: [
          attempt("own-write", `echo mine > ${ws}/own.txt`),
          attempt("private-write", `echo tmp > ${priv}/scratch`),
          attempt("read-etc", "grep -q root /etc/passwd"),
          attempt("read-outside", `grep -q '"name"' ${outside}/package.json`),
          attempt("dev-null", "echo x > /dev/null"),
          attempt("host-pid", `test -e /proc/${process.pid}`),
          attempt("read-host-tmp", `cat ${other}/secret.txt`),
          attempt("write-tmp", write(hostTmpMarker)),
          attempt("write-usr", write(usrMarker)),
          attempt("write-outside", `echo x > ${outside}/pwned`)
        ].join("\n"),
        shell: true,
        cwd: ws,
        privateDirs: [priv],
        sandbox: { network: false, allow: { read: ["/"] } }
      }).pipe(Effect.provide(NodeServices.layer))
      assert.deepStrictEqual(verdicts(result.tail), {
        "own-write": "ok",
        "private-write": "ok",
        "read-etc": "ok",
        "read-outside": "ok",
        "dev-null": "ok",
        "host-pid": "blocked",
        "read-host-tmp": "blocked",
        "write-tmp": "blocked",
        "write-usr": "blocked",
        "write-outside": "blocked"
      })
      assert.isFalse(existsSync(join(outside, "pwned")))
      assert.isFalse(existsSync(hostTmpMarker))
      assert.isFalse(existsSync(usrMarker))
    }).pipe(Effect.scoped)
  )

  it.live(
    "allow.read of /: the user's sockets under /run/user (session bus, ssh and gpg agents) are out of reach",
    () =>
      Effect.gen(function* () {
        const runtime = `/run/user/${process.getuid?.() ?? 0}`
        const made = !existsSync(runtime)
        if (made) mkdirSync(runtime, { recursive: true, mode: 0o700 })
        const path = join(runtime, `corral-sandbox-${process.pid}.sock`)
        const bus = net.createServer((socket) => socket.end())
        yield* Effect.acquireRelease(
          Effect.promise(() => new Promise<void>((resolve) => bus.listen(path, resolve))),
          () =>
            Effect.promise(async () => {
              await new Promise((resolve) => bus.close(resolve))
              rmSync(made ? runtime : path, { recursive: true, force: true })
            })
        )
        const connect = `require("net").connect(${JSON.stringify(path)}).on("connect", () => process.exit(0)).on("error", () => process.exit(1))`
        const command = attempt("connect-bus", `${process.execPath} -e '${connect}'`)
        const outside = yield* ProcessRunner.run({ command, shell: true, cwd: ws }).pipe(
          Effect.provide(NodeServices.layer)
        )
        assert.deepStrictEqual(verdicts(outside.tail), { "connect-bus": "ok" }, "the probe connects without a sandbox")
        const result = yield* ProcessRunner.run({
          command,
          shell: true,
          cwd: ws,
          privateDirs: [priv],
          sandbox: { network: false, allow: { read: ["/"] } }
        }).pipe(Effect.provide(NodeServices.layer))
        assert.deepStrictEqual(verdicts(result.tail), { "connect-bus": "blocked" })
      }).pipe(Effect.scoped)
  )

  it.live("hide: a folder inside the workspace is empty and read-only, a private folder inside it stays", () =>
    Effect.gen(function* () {
      const state = join(ws, "state")
      const inner = join(state, "agent-tmp")
      mkdirSync(inner, { recursive: true })
      writeFileSync(join(state, "ledger.db"), "state-secret")
      const result = yield* ProcessRunner.run({
        command: [
          attempt("read-hidden", `cat ${state}/ledger.db`),
          attempt("write-hidden", `echo x > ${state}/pwned`),
          attempt("write-inner", `echo x > ${inner}/scratch`)
        ].join("\n"),
        shell: true,
        cwd: ws,
        privateDirs: [inner],
        sandbox: { hide: [state] }
      }).pipe(Effect.provide(NodeServices.layer))
      assert.deepStrictEqual(verdicts(result.tail), {
        "read-hidden": "blocked",
        "write-hidden": "blocked",
        "write-inner": "ok"
      })
      assert.strictEqual(readFileSync(join(state, "ledger.db"), "utf8"), "state-secret")
      assert.isFalse(existsSync(join(state, "pwned")))
    })
  )

  it.live("network: true keeps the host's network (the same connection succeeds)", () =>
    Effect.gen(function* () {
      const before = connections
      const result = yield* runSandboxed({ network: true })
      assert.strictEqual(verdicts(result.tail).tcp, "ok")
      assert.strictEqual(verdicts(result.tail)["read-other"], "blocked")
      assert.isAbove(connections, before)
    })
  )

  it.live("the same attempts succeed without a sandbox (the test can fail)", () =>
    Effect.gen(function* () {
      const probe = (path: string) => `test -w ${dirname(path)}`
      const result = yield* ProcessRunner.run({ command: attempts(probe), shell: true, cwd: ws }).pipe(
        Effect.provide(NodeServices.layer)
      )
      const seen = verdicts(result.tail)
      assert.strictEqual(seen["read-other"], "ok")
      assert.strictEqual(seen["read-home"], "ok")
      assert.strictEqual(seen["write-root"], "ok")
      assert.strictEqual(seen["write-tmp"], "ok")
      assert.strictEqual(seen["write-usr"], process.getuid?.() === 0 ? "ok" : "blocked")
      assert.strictEqual(seen["host-pid"], "ok")
    })
  )

  it.live("limits and the process tree are enforced inside the sandbox", () =>
    Effect.gen(function* () {
      const error = yield* ProcessRunner.run({
        command: `${process.execPath} -e "const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))"`,
        shell: true,
        cwd: ws,
        sandbox: { allow: { read: [process.execPath] } },
        limits: { memoryMb: 150 }
      }).pipe(Effect.provide(NodeServices.layer), Effect.flip)
      assert.strictEqual(error.reason, "limit")
      assert.strictEqual(error.limit, "memoryMb")
    })
  )
})

describe.skipIf(!enabled)("ProcessRunner sandbox: network loopback", () => {
  it.live("reaches only the allowed ports of the host's 127.0.0.1, with data both ways", () =>
    Effect.gen(function* () {
      const echo = net.createServer((socket) => socket.on("data", (data) => socket.end(`pong ${data}`)))
      yield* Effect.promise(() => new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve)))
      const echoPort = (echo.address() as net.AddressInfo).port
      const before = connections
      const result = yield* ProcessRunner.run({
        command: [
          `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${echoPort}; echo ping >&3; read -r line <&3; echo "reply:$line"'`,
          attempt("other-port", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'`)
        ].join("\n"),
        shell: true,
        cwd: ws,
        sandbox: { network: "loopback", allow: { ports: [echoPort] } }
      }).pipe(
        Effect.provide(NodeServices.layer),
        Effect.ensuring(Effect.promise(() => new Promise((resolve) => echo.close(resolve))))
      )
      assert.deepStrictEqual([...result.tail], ["reply:pong ping", "other-port:blocked"])
      assert.strictEqual(connections, before)
    })
  )

  it.live("the command's exit code passes through the forwarder", () =>
    Effect.gen(function* () {
      const error = yield* ProcessRunner.run({
        command: "exit 7",
        shell: true,
        cwd: ws,
        sandbox: { network: "loopback" }
      }).pipe(Effect.provide(NodeServices.layer), Effect.flip)
      assert.strictEqual(error.reason, "exit")
      assert.strictEqual(error.exitCode, 7)
    })
  )
})

describe.skipIf(!enabled)("ProcessAgent sandbox option", () => {
  it.live("agents with sandbox run under Corral.run; one cannot read what the other may", () =>
    Effect.gen(function* () {
      const read = `cat ${other}/secret.txt`
      const result = yield* Corral.run([
        ProcessAgent.make("open", { command: read, shell: true, cwd: ws }),
        ProcessAgent.make("boxed", { command: read, shell: true, cwd: ws, sandbox: { network: false } })
      ]).pipe(Effect.provide(NodeServices.layer))
      assert.deepStrictEqual(
        result.succeeded.map((outcome) => outcome.agentId),
        ["open"]
      )
      assert.deepStrictEqual(
        result.failed.map((outcome) => outcome.agentId),
        ["boxed"]
      )
    })
  )
})

describe.skipIf(!enabled)("ProcessRunner sandbox: process trees", () => {
  it.live("protocol folders: a result comes back, a folder with files goes, an empty one serves the next run", () =>
    Effect.gen(function* () {
      const run = (command: string) =>
        ProcessRunner.run({ command, shell: true, cwd: ws, sandbox: true }).pipe(Effect.provide(NodeServices.layer))
      const folderOf = (tail: ReadonlyArray<string>) => tail.find((line) => line.startsWith("dir:"))!.slice(4)
      const showFolder =
        'echo "dir:$(dirname "$CORRAL_USAGE_FILE")"; echo "files:$(ls -A "$(dirname "$CORRAL_USAGE_FILE")" | wc -l)"'
      const wrote = yield* run(
        `${showFolder}; echo '{"n":1}' > "$CORRAL_RESULT_FILE"; echo '{"inputTokens":3}' >> "$CORRAL_USAGE_FILE"`
      )
      assert.deepStrictEqual(wrote.result, { n: 1 })
      assert.isFalse(existsSync(folderOf(wrote.tail)), "a folder with files in it is removed")
      const first = yield* run(showFolder)
      const second = yield* run(showFolder)
      assert.isUndefined(first.result)
      assert.isUndefined(second.result)
      assert.include(first.tail, "files:0")
      assert.include(second.tail, "files:0")
      assert.strictEqual(folderOf(second.tail), folderOf(first.tail), "the empty folder serves the next run")
      assert.isTrue(existsSync(folderOf(second.tail)))
    })
  )

  it.live("interrupting a sandboxed process ends every process inside it", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<number>()
      let leader = 0
      const fiber = yield* Effect.forkChild(
        ProcessRunner.run({
          command: "sleep 1000 & sleep 1000 & echo started; wait",
          shell: true,
          cwd: ws,
          sandbox: true,
          onProcess: (pid) => {
            if (pid !== undefined) leader = pid
          },
          onLine: () => Deferred.doneUnsafe(started, Exit.succeed(leader))
        }).pipe(Effect.provide(NodeServices.layer)),
        { startImmediately: true }
      )
      const pgid = yield* Deferred.await(started)
      assert.isAtLeast(liveGroupMembers(pgid), 3, "bwrap, the shell and its two sleeps share the group")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(liveGroupMembers(pgid), 0)
    })
  )
})

// Sandboxed processes start through the spawn helper, as a run's do once it is up.
beforeAll(async () => {
  setThroughHelper(true)
  assert.isDefined(await sharedHelper().ready(), "the spawn helper did not start")
})

describe("ProcessRunner sandbox without bubblewrap", () => {
  it.live("fails to start with an install hint instead of running unsandboxed", () =>
    Effect.gen(function* () {
      const marker = join(root, "ran-unsandboxed")
      const saved = process.env.CORRAL_BWRAP
      process.env.CORRAL_BWRAP = join(root, "no-such-bwrap")
      const error = yield* ProcessRunner.run({ command: `touch ${marker}`, shell: true, sandbox: true }).pipe(
        Effect.provide(NodeServices.layer),
        Effect.flip,
        Effect.ensuring(
          Effect.sync(() => {
            if (saved === undefined) delete process.env.CORRAL_BWRAP
            else process.env.CORRAL_BWRAP = saved
          })
        )
      )
      assert.strictEqual(error.reason, "spawn")
      assert.match(error.message, /apt-get install bubblewrap/)
      assert.isFalse(existsSync(marker))
    })
  )
})

describe("Sandbox.hideWithin", () => {
  it("hides a folder strictly inside a shown one, the root included, and nothing else", () => {
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral", ["/"]), ["/srv/repo/.corral"])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral/", ["/srv/repo"]), ["/srv/repo/.corral"])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral", ["/elsewhere", "/srv/"]), ["/srv/repo/.corral"])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral", ["/srv/repo/.corral"]), [])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral", ["/srv/repo/.corral/agents"]), [])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo-2/.corral", ["/srv/repo"]), [])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/..state", ["/srv"]), ["/srv/..state"])
    assert.deepStrictEqual(Sandbox.hideWithin("/srv/repo/.corral", []), [])
  })
})
