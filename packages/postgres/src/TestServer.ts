/**
 * A throwaway PostgreSQL server for tests, demos and benchmarks: `initdb --no-sync` into a temporary
 * folder, `pg_ctl start -w` on a free 127.0.0.1 port (and a unix socket in the same folder), stopped
 * by its postmaster pid and deleted when the scope closes.
 *
 * As root the binaries run as the `postgres` user (`runuser -u postgres --`). Every exit path stops
 * the server: the scope's finalizer, a `process.on("exit")` hook, and a detached watchdog shell
 * that stops it when the starting process dies without either (e.g. SIGKILL).
 *
 * The binaries are looked for in `$CORRAL_PG_BIN`, then `/usr/lib/postgresql/<newest>/bin`, then
 * `PATH`; `.ci/install-test-tools` installs Debian's `postgresql` when none is found.
 *
 * @since 0.1.0
 */
import { execFile, spawn } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { delimiter, join } from "node:path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"

/**
 * The server could not be found, initialised or started.
 *
 * @since 0.1.0
 * @category errors
 */
export class TestServerError extends Data.TaggedError("TestServerError")<{
  readonly step: "find" | "initdb" | "start" | "createdb"
  readonly message: string
}> {}

/**
 * A running throwaway server.
 *
 * @since 0.1.0
 * @category models
 */
export interface TestServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string
  readonly port: number
  /** The folder holding the data directory, the log and the unix socket. */
  readonly dir: string
  /** The postmaster's pid. */
  readonly pid: number
  /** Creates an empty database and returns its URL. */
  readonly createDatabase: (name?: string) => Effect.Effect<string, TestServerError>
  /** The URL of another database on this server. */
  readonly urlOf: (database: string) => string
  /** Stops the server at once (SIGQUIT to the postmaster) and waits until its pid is gone; idempotent. */
  readonly kill: Effect.Effect<void>
  /** Starts the server again on the same folder and port (after `kill`). */
  readonly restart: Effect.Effect<void, TestServerError>
}

/**
 * Where the PostgreSQL binaries are, or why none were found.
 *
 * @since 0.1.0
 * @category models
 */
export type Binaries =
  | { readonly _tag: "Found"; readonly bin: string }
  | { readonly _tag: "Missing"; readonly reason: string }

const hasTools = (dir: string): boolean => existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))

/**
 * Looks for `initdb` and `pg_ctl`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const findBinaries = (): Binaries => {
  const fromEnv = process.env.CORRAL_PG_BIN
  if (fromEnv !== undefined && fromEnv !== "") {
    return hasTools(fromEnv)
      ? { _tag: "Found", bin: fromEnv }
      : { _tag: "Missing", reason: `CORRAL_PG_BIN=${fromEnv} has no initdb and pg_ctl` }
  }
  const debian = "/usr/lib/postgresql"
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
    for (const version of versions)
      if (hasTools(join(debian, version, "bin"))) return { _tag: "Found", bin: join(debian, version, "bin") }
  }
  for (const dir of (process.env.PATH ?? "").split(delimiter))
    if (dir !== "" && hasTools(dir)) return { _tag: "Found", bin: dir }
  return {
    _tag: "Missing",
    reason: "no initdb and pg_ctl under /usr/lib/postgresql/*/bin or on PATH (install postgresql)"
  }
}

const isRoot = (): boolean => process.getuid?.() === 0

/** As root, a command line run as the `postgres` user. */
const asServerUser = (bin: string, file: string, args: ReadonlyArray<string>): [string, Array<string>] =>
  isRoot() ? ["runuser", ["-u", "postgres", "--", join(bin, file), ...args]] : [join(bin, file), [...args]]

const run = (step: TestServerError["step"], command: readonly [string, ReadonlyArray<string>]) =>
  Effect.callback<string, TestServerError>((resume) => {
    const child = execFile(command[0], command[1], { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error === null) resume(Effect.succeed(stdout))
      else
        resume(
          Effect.fail(
            new TestServerError({ step, message: `${command[0]} ${command[1].join(" ")}: ${stderr || error.message}` })
          )
        )
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const freePort = Effect.callback<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const readPid = (dataDir: string): number | undefined => {
  const file = join(dataDir, "postmaster.pid")
  if (!existsSync(file)) return undefined
  const pid = Number(readFileSync(file, "utf8").split("\n")[0])
  return Number.isInteger(pid) && pid > 0 ? pid : undefined
}

const killNow = (pid: number): void => {
  try {
    process.kill(pid, "SIGQUIT")
  } catch {}
}

/** A detached shell that stops the server and deletes its folder once `parent` has died. */
const watchdog = (parent: number, pidFile: string, dir: string) => {
  const script = `while kill -0 ${parent} 2>/dev/null; do sleep 1; done
pid=$(head -n 1 '${pidFile}' 2>/dev/null); [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null
sleep 1; rm -rf '${dir}'`
  const child = spawn("sh", ["-c", script], { detached: true, stdio: "ignore" })
  child.unref()
  return child
}

const waitUntilGone = (pid: number) =>
  Effect.suspend(() => (isAlive(pid) ? Effect.fail("alive" as const) : Effect.void)).pipe(
    Effect.retry(Schedule.spaced("10 millis")),
    Effect.timeoutOrElse({ duration: "30 seconds", orElse: () => Effect.sync(() => process.kill(pid, "SIGKILL")) }),
    Effect.ignore
  )

/**
 * Options of {@link start}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Extra `-c name=value` server settings. */
  readonly settings?: Readonly<Record<string, string>> | undefined
}

/**
 * Starts a server in a new temporary folder; it is stopped and deleted when the scope closes.
 *
 * @example
 * ```ts
 * import { TestServer } from "@corral/postgres"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const server = yield* TestServer.start()
 *   const url = yield* server.createDatabase()
 *   return url // postgres://postgres@127.0.0.1:<port>/corral_1
 * }).pipe(Effect.scoped)
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const start = (options: Options = {}): Effect.Effect<TestServer, TestServerError, Scope.Scope> =>
  Effect.gen(function* () {
    const found = findBinaries()
    if (found._tag === "Missing") return yield* new TestServerError({ step: "find", message: found.reason })
    const bin = found.bin
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const dir = mkdtempSync(join(tmpdir(), "corral-pg-"))
        if (isRoot()) {
          const { uid, gid } = userInfoOf("postgres")
          chownSync(dir, uid, gid)
        }
        chmodSync(dir, 0o700)
        return dir
      }),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const dataDir = join(dir, "data")
    yield* run(
      "initdb",
      asServerUser(bin, "initdb", ["-D", dataDir, "--no-sync", "-A", "trust", "-U", "postgres", "-E", "UTF8"])
    )
    const port = yield* freePort
    const settings = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: dir,
      // The machine does not crash under a test, so skipping fsync loses nothing; commits stay
      // synchronous so that an immediate shutdown (`kill`) keeps every committed transaction.
      fsync: "off",
      full_page_writes: "off",
      max_connections: "200",
      ...options.settings
    }
    const serverOptions = [`-p ${port}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(" ")
    const pgCtlStart = asServerUser(bin, "pg_ctl", [
      "-D",
      dataDir,
      "-o",
      serverOptions,
      "-l",
      join(dir, "log"),
      "-w",
      "-t",
      "60",
      "start"
    ])
    let pid = 0
    const onExit = () => killNow(pid)
    const startServer = Effect.gen(function* () {
      yield* run("start", pgCtlStart).pipe(
        Effect.mapError((error) => new TestServerError({ step: "start", message: `${error.message}\n${logTail(dir)}` }))
      )
      const started = readPid(dataDir)
      if (started === undefined)
        return yield* new TestServerError({ step: "start", message: "postmaster.pid missing after pg_ctl start" })
      pid = started
    })
    const kill = Effect.suspend(() => {
      const current = pid
      if (current === 0 || !isAlive(current)) return Effect.void
      killNow(current)
      return waitUntilGone(current)
    })
    yield* Effect.acquireRelease(startServer, () => kill)
    process.on("exit", onExit)
    yield* Effect.addFinalizer(() => Effect.sync(() => process.off("exit", onExit)))
    yield* Effect.acquireRelease(
      Effect.sync(() => watchdog(process.pid, join(dataDir, "postmaster.pid"), dir)),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    const urlOf = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`
    let databases = 0
    return {
      url: urlOf("postgres"),
      port,
      dir,
      get pid() {
        return pid
      },
      urlOf,
      kill,
      restart: startServer,
      createDatabase: (name) =>
        Effect.suspend(() => {
          const database = name ?? `corral_${++databases}`
          return Effect.as(
            run("createdb", asServerUser(bin, "createdb", ["-h", dir, "-p", String(port), "-U", "postgres", database])),
            urlOf(database)
          )
        })
    } satisfies TestServer
  })

const userInfoOf = (name: string): { uid: number; gid: number } => {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((entry) => entry.startsWith(`${name}:`))
  if (line === undefined) return { uid: userInfo().uid, gid: userInfo().gid }
  const [, , uid, gid] = line.split(":")
  return { uid: Number(uid), gid: Number(gid) }
}

const logTail = (dir: string): string => {
  const file = join(dir, "log")
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").slice(-20).join("\n") : ""
}
