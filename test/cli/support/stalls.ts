/**
 * Tools the end-to-end tests put in corral's way: a preload that refuses the machine-wide port-block
 * socket, a preload that counts the connections to a port, and a `git` that hangs on one command, for
 * the tests of the port-block fallback, of an unreachable collector and of an agent's timeout against
 * the stop grace (locally and on a cluster runner).
 */
import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

/**
 * Writes `refuse.mjs` into `dir`, a module for `NODE_OPTIONS=--import <it>` under which every
 * `listen` on a `@corral-ports-…` abstract socket fails with EACCES (the fallback to a private block);
 * answers its path.
 */
export const refusePortsPreload = (dir: string): string =>
  writePreload(
    dir,
    "refuse.mjs",
    `import net from "node:net"
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] !== "string" || !args[0].startsWith("\\0corral-ports-")) return Reflect.apply(listen, this, args)
  process.nextTick(() => this.emit("error", Object.assign(new Error("listen EACCES"), { code: "EACCES" })))
  return this
}
`
  )

/** Writes the module `source` as `<dir>/<name>` and answers its path, for `NODE_OPTIONS=--import <it>`. */
const writePreload = (dir: string, name: string, source: string): string => {
  const file = NodePath.join(dir, name)
  NodeFs.writeFileSync(file, source)
  return file
}

/**
 * Writes `connects.mjs` into `dir`, a module for `NODE_OPTIONS=--import <it>` that appends a line to
 * `<dir>/connects` at each TCP connection the process starts to `port`; answers its path.
 */
export const connectCounter = (dir: string, port: number): string =>
  writePreload(
    dir,
    "connects.mjs",
    `import fs from "node:fs"
import net from "node:net"
const connect = net.Socket.prototype.connect
net.Socket.prototype.connect = function (...args) {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0]
  const port = typeof first === "object" && first !== null ? first.port : first
  if (Number(port) === ${port}) fs.appendFileSync(${JSON.stringify(NodePath.join(dir, "connects"))}, "connect\\n")
  return Reflect.apply(connect, this, args)
}
`
  )

/** The connections a process under {@link connectCounter}`(dir, …)` started. */
export const connectsIn = (dir: string): number => {
  const file = NodePath.join(dir, "connects")
  return NodeFs.existsSync(file) ? NodeFs.readFileSync(file, "utf8").split("\n").length - 1 : 0
}

/** The warning a run shows for the block starting at `first` under `refusePortsPreload`. */
export const portBlockWarning = (first: number): string =>
  `warning: port block ${first}-${first + 9} is private to this corral process only, not machine-wide: cannot make the abstract socket @corral-ports-${first} (EACCES); another corral process on this machine may give its agents the same ports`

/**
 * A `git` script (for `fakeTools`) that, for a command line matching the shell `case` pattern, notes
 * `start <ns>` in `<marks>/git` (and its pid in `<marks>/pid`), notes `term <ns>` at each SIGTERM
 * without exiting, and hangs for 30 s; every other command runs the real git.
 */
export const hangingGit = (pattern: string, marks: string): string => {
  const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()
  return `#!/bin/sh
case " $* " in
${pattern})
  trap 'echo "term $(date +%s%N)" >> ${marks}/git' TERM
  echo "start $(date +%s%N)" >> ${marks}/git
  echo $$ > ${marks}/pid
  i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done ;;
esac
exec ${realGit} "$@"
`
}
