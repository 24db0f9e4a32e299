import { execFileSync } from "node:child_process"
import { readFile } from "node:fs/promises"
import { join } from "node:path"

let made = 0

/** A named pipe in `dir` for a script's pid, and a file for what it did. */
const files = (dir: string) => {
  const pidPipe = join(dir, `script-${process.pid}-${made}.pid`)
  const outcome = join(dir, `script-${process.pid}-${made++}.outcome`)
  execFileSync("mkfifo", [pidPipe])
  return { pidPipe, outcome }
}

/**
 * A `sh -c` script that runs until it gets SIGTERM, on which it takes 300 ms to clean up (as git
 * removes its lock files) before it writes `cleaned` to `outcome` and exits. `pid` resolves with its
 * pid once it runs (read from a named pipe in `dir`: no polling).
 */
export const slowToStop = (dir: string) => {
  const { pidPipe, outcome } = files(dir)
  const script = `trap 'kill $!; sleep 0.3; echo cleaned >> ${outcome}; exit 143' TERM; sleep 1000 & echo $$ > ${pidPipe}; wait`
  return { script, pid: readFile(pidPipe, "utf8").then(Number), outcome }
}

/**
 * A `sh -c` script that works 300 ms and writes `finished` to `outcome` (and `terminated` first if it
 * got SIGTERM meanwhile), as a git command does its work and exits by itself.
 */
export const finishingSoon = (dir: string) => {
  const { pidPipe, outcome } = files(dir)
  const script = `trap 'echo terminated >> ${outcome}' TERM; echo $$ > ${pidPipe}; sleep 0.3; echo finished >> ${outcome}`
  return { script, pid: readFile(pidPipe, "utf8").then(Number), outcome }
}
