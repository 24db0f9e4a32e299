import { execFile } from "node:child_process"

/**
 * A plain `child_process.spawn` pool running one command line at the given concurrency in a fresh
 * Node.js process, timed inside it (its start-up excluded): what starting the same command costs
 * without corral, free of the bench process's own size (a full \`pnpm bench\` has built millions of
 * agents by then, and forking it costs accordingly). CPU: the pool process's own and its reaped
 * children's (from /proc/self/stat).
 */
const SCRIPT = `
const { spawn } = require("node:child_process")
const [processes, concurrency] = process.argv.slice(1, 3).map(Number)
const argv = JSON.parse(process.argv[3])
const cwd = process.argv[4]
const runOne = () => new Promise((resolve, reject) => {
  const child = spawn(argv[0], argv.slice(1), { cwd, stdio: ["ignore", "pipe", "pipe"], detached: true })
  child.on("error", reject)
  child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(argv[0] + " exited with " + code))))
})
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000 }
const children = () => { const f = require("node:fs").readFileSync("/proc/self/stat", "latin1"); const x = f.slice(f.lastIndexOf(")") + 2).split(" "); return (Number(x[13]) + Number(x[14])) * 10 }
const main = async () => {
  let next = 0
  const worker = async () => { while (next < processes) { next++; await runOne() } }
  const own = cpu(), kids = children(), start = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  process.stdout.write(JSON.stringify({ ms: performance.now() - start, ownMs: cpu() - own, childrenMs: children() - kids }))
}
main().catch((error) => { process.stderr.write(String(error)); process.exitCode = 1 })
`

export interface FreshPoolRun {
  readonly ms: number
  readonly ownMs: number
  readonly childrenMs: number
}

/** Runs `node <args>` and reads the run's figures from its standard output. */
export const runFresh = (args: ReadonlyArray<string>): Promise<FreshPoolRun> =>
  new Promise((resolve, reject) =>
    execFile(process.execPath, args, (error, stdout, stderr) => {
      if (error !== null) return reject(new Error(`${error.message}\n${stderr}`))
      resolve(JSON.parse(stdout) as FreshPoolRun)
    })
  )

export const freshPool = (
  processes: number,
  concurrency: number,
  argv: ReadonlyArray<string>,
  cwd: string = process.cwd()
): Promise<FreshPoolRun> => runFresh(["-e", SCRIPT, String(processes), String(concurrency), JSON.stringify(argv), cwd])
