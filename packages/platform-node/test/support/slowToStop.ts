import { execFileSync } from "node:child_process"
import { readFile } from "node:fs/promises"
import { join } from "node:path"

let made = 0

/**
 * A `sh -c` script that runs until it gets SIGTERM, on which it takes 300 ms to clean up (as git
 * removes its lock files) before it writes `cleaned` to the file `cleaned` and exits. `pid` resolves
 * with its pid once it runs (read from a named pipe in `dir`: no polling).
 */
export const slowToStop = (dir: string) => {
  const pidPipe = join(dir, `slow-${process.pid}-${made}.pid`)
  const cleaned = join(dir, `slow-${process.pid}-${made++}.cleaned`)
  execFileSync("mkfifo", [pidPipe])
  const script = `trap 'kill $!; sleep 0.3; echo cleaned > ${cleaned}; exit 143' TERM; sleep 1000 & echo $$ > ${pidPipe}; wait`
  return { script, pidPipe: readFile(pidPipe, "utf8").then(Number), cleaned }
}
