/**
 * Tools the end-to-end tests put in corral's way: a preload that refuses the machine-wide port-block
 * socket, and a `git` that hangs on one command, for the tests of the port-block fallback and of an
 * agent's timeout against the stop grace (locally and on a cluster runner).
 */
import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

/**
 * Writes `refuse.mjs` into `dir`, a module for `NODE_OPTIONS=--import <it>` under which every
 * `listen` on a `@corral-ports-…` abstract socket fails with EACCES (the fallback to a private block);
 * answers its path.
 */
export const refusePortsPreload = (dir: string): string => {
  const file = NodePath.join(dir, "refuse.mjs")
  NodeFs.writeFileSync(
    file,
    `import net from "node:net"
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] !== "string" || !args[0].startsWith("\\0corral-ports-")) return Reflect.apply(listen, this, args)
  process.nextTick(() => this.emit("error", Object.assign(new Error("listen EACCES"), { code: "EACCES" })))
  return this
}
`
  )
  return file
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
