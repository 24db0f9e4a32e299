/**
 * The bubblewrap command line of a sandboxed process. bubblewrap itself builds the namespaces; this
 * module only decides what the process sees: the system read-only, its working directory and private
 * folders read-write, the allowed paths, and nothing else (the root is an empty tmpfs, remounted
 * read-only, so a write anywhere else fails instead of landing in a throwaway copy). An allowed `/`
 * replaces that root; the sandbox's own /proc, /dev and an empty /tmp and /run/user still go over it.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { SandboxOptions } from "../ProcessRunner.ts"
import { type Bridge, forwarderArgv } from "./sandboxBridge.ts"
import { toolFinder } from "./executable.ts"

export interface SandboxPaths {
  readonly cwd: string
  readonly privateDirs: ReadonlyArray<string>
  readonly searchPath: string | undefined
  readonly home: string | undefined
}

export interface Support {
  readonly available: boolean
  readonly bwrap: string | undefined
  readonly version: string | undefined
  readonly network: boolean
  readonly detail: string
}

export const installHint =
  "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`, Arch: `pacman -S bubblewrap`)"

/** The last executable found, by `CORRAL_BWRAP` and `PATH`: every sandboxed run looks it up. */
/** `CORRAL_BWRAP` names the executable; otherwise `bwrap` is looked up in PATH. */
export const findBwrap = toolFinder("CORRAL_BWRAP", "bwrap")

const systemDirs = ["/usr", "/etc", "/opt"]
const systemLinks = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

const exists = (file: string): boolean => fs.existsSync(file)

const within = (child: string, parent: string): boolean =>
  child === parent || child.startsWith(parent.endsWith("/") ? parent : `${parent}/`)

/** The system folders do not move while corral runs: they are looked at once. */
let cachedSystemArgs: ReadonlyArray<string> | undefined

const systemArgs = (): ReadonlyArray<string> => (cachedSystemArgs ??= readSystemArgs())

const readSystemArgs = (): Array<string> => {
  const args: Array<string> = []
  for (const dir of systemDirs) if (exists(dir)) args.push("--ro-bind", dir, dir)
  for (const dir of systemLinks) {
    const stat = fs.lstatSync(dir, { throwIfNoEntry: false })
    if (stat === undefined) continue
    if (stat.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(dir), dir)
    else args.push("--ro-bind", dir, dir)
  }
  return args
}

const probeArgs = (network: boolean): Array<string> => [
  ...systemArgs(),
  "--proc",
  "/proc",
  "--dev",
  "/dev",
  "--unshare-pid",
  "--unshare-ipc",
  "--cap-drop",
  "ALL",
  ...(network ? ["--unshare-net"] : []),
  "--remount-ro",
  "/",
  "--",
  "true"
]

const tryRun = (file: string, args: ReadonlyArray<string>): string | undefined => {
  try {
    execFileSync(file, args, { stdio: ["ignore", "ignore", "pipe"], timeout: 10_000 })
    return undefined
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim()
    return stderr === undefined || stderr === "" ? String(error) : stderr
  }
}

const versionOf = (file: string): string | undefined => {
  try {
    return execFileSync(file, ["--version"], { encoding: "utf8", timeout: 10_000 }).trim()
  } catch {
    return undefined
  }
}

const cachedSupport = new Map<string, Support>()

/** Runs `bwrap … true` once per executable (with and without a network namespace) and caches the answer. */
export const support = (env: NodeJS.ProcessEnv = process.env): Support => {
  if (process.platform !== "linux") {
    return {
      available: false,
      bwrap: undefined,
      version: undefined,
      network: false,
      detail: `sandboxes need Linux (bubblewrap); this is ${process.platform}`
    }
  }
  const bwrap = findBwrap(env)
  if (bwrap === undefined) {
    const where = env.CORRAL_BWRAP === undefined ? "in PATH" : `at CORRAL_BWRAP=${env.CORRAL_BWRAP}`
    return { available: false, bwrap, version: undefined, network: false, detail: `no bwrap ${where}; ${installHint}` }
  }
  const cached = cachedSupport.get(bwrap)
  if (cached !== undefined) return cached
  const failure = tryRun(bwrap, probeArgs(false))
  const netFailure = failure === undefined ? tryRun(bwrap, probeArgs(true)) : failure
  const version = versionOf(bwrap)
  const result: Support =
    failure === undefined
      ? {
          available: true,
          bwrap,
          version,
          network: netFailure === undefined,
          detail:
            netFailure === undefined
              ? `${version ?? "bwrap"} at ${bwrap}`
              : `${version ?? "bwrap"} at ${bwrap}; no network namespaces (${netFailure})`
        }
      : {
          available: false,
          bwrap,
          version,
          network: false,
          detail: `${bwrap} cannot create a sandbox on this machine (${failure}); it needs unprivileged user namespaces or root`
        }
  cachedSupport.set(bwrap, result)
  return result
}

/** Why a sandbox with these options cannot run here, or `undefined` when it can. */
export const unsupported = (options: SandboxOptions, found: Support = support()): string | undefined => {
  if (!found.available) return `a sandbox was requested but ${found.detail}`
  if (options.network !== undefined && options.network !== true && !found.network) {
    return `network: ${options.network} was requested but ${found.detail}`
  }
  if ((options.allow?.ports ?? []).length > 0 && options.network !== "loopback") {
    return `allow.ports needs network: "loopback" (got network: ${options.network ?? true})`
  }
  return undefined
}

const mounts = (paths: SandboxPaths, options: SandboxOptions): Array<readonly [string, string]> => {
  const entries: Array<readonly [string, string]> = []
  const home = paths.home === undefined ? undefined : path.resolve(paths.home)
  for (const dir of (paths.searchPath ?? "").split(path.delimiter)) {
    if (!path.isAbsolute(dir) || !exists(dir)) continue
    if (systemDirs.some((root) => within(dir, root)) || systemLinks.includes(dir)) continue
    if (within(paths.cwd, dir) || (home !== undefined && (within(dir, home) || within(home, dir)))) continue
    entries.push(["--ro-bind", dir])
  }
  for (const dir of options.allow?.read ?? []) entries.push(["--ro-bind", path.resolve(dir)])
  for (const dir of options.allow?.write ?? []) entries.push(["--bind", path.resolve(dir)])
  for (const dir of paths.privateDirs) entries.push(["--bind", path.resolve(dir)])
  for (const dir of options.hide ?? []) entries.push(["--tmpfs", path.resolve(dir)])
  if (entries.some(([, dir]) => dir === "/")) for (const dir of hiddenUnderRoot) entries.push(["--tmpfs", dir])
  entries.push(["--bind", paths.cwd])
  // Parents before children, so that a read-write folder inside a read-only one is mounted on top of it.
  return entries.sort(([, a], [, b]) => depth(a) - depth(b))
}

/**
 * What an allowed `/` still hides: `/tmp` (other processes' files) and `/run/user`, whose Unix
 * sockets (the session bus, which starts programs outside the sandbox; ssh and gpg agents) a
 * read-only mount does not keep a process from connecting to.
 */
const hiddenUnderRoot = ["/tmp", "/run/user"]

const depth = (dir: string): number => (dir === "/" ? 0 : dir.split("/").length)

/**
 * Process 1 of the sandbox's PID namespace: a shell that runs the command as its child and exits with
 * its status. bubblewrap's own init reports the status before it is reaped, and its zombie outlives
 * the run (in our process group) on hosts whose init does not reap; a shell as process 1 is reaped by
 * bwrap itself. Process 1 ignores SIGTERM from outside, but the command (same process group) gets it.
 */
const INIT = ["/bin/sh", "-c", '"$@" & wait $!', "corral-sandbox"] as const

/** Wraps `argv` in `bwrap`; every mounted path keeps its own name, so the environment needs no rewriting. */
export const wrap = (
  bwrap: string,
  argv: readonly [string, ...Array<string>],
  paths: SandboxPaths,
  options: SandboxOptions,
  bridge?: Bridge
): readonly [string, ...Array<string>] => {
  const entries = mounts(paths, options)
  const root = entries.filter(([, dir]) => dir === "/")
  // An allowed `/` already holds the system folders; the sandbox's own /proc and /dev go over it.
  const system = root.length > 0 ? root.flatMap(([kind]) => [kind, "/", "/"]) : systemArgs()
  const args = [...system, "--proc", "/proc", "--dev", "/dev"]
  const hidden: Array<string> = []
  for (const [kind, dir] of entries) {
    if (dir === "/" || !exists(dir)) continue
    if (kind === "--tmpfs") {
      // Empty while the folders inside it are mounted, read-only afterwards.
      args.push("--perms", "0555", kind, dir)
      hidden.push("--remount-ro", dir)
    } else args.push(kind, dir, dir)
  }
  if (bridge !== undefined)
    args.push("--ro-bind", process.execPath, process.execPath, "--ro-bind", bridge.dir, bridge.dir)
  args.push("--unshare-pid", "--as-pid-1", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL", "--die-with-parent")
  if (options.network === false || options.network === "loopback") args.push("--unshare-net")
  const command = bridge === undefined ? argv : forwarderArgv(bridge, argv)
  args.push(...hidden, "--chdir", paths.cwd, "--remount-ro", "/", "--", ...INIT, ...command)
  return [bwrap, ...args]
}
