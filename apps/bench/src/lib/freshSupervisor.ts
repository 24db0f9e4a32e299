import { type FreshPoolRun, runFresh } from "./freshPool.ts"

const internal = (file: string) =>
  new URL(`../../../../packages/platform-node/src/internal/${file}`, import.meta.url).href

/**
 * The least a process supervisor built like corral's does per process, in a fresh Node.js process of
 * its own, timed inside it (its start-up and its spawn helper's excluded): the same pool as
 * `freshPool.ts`, but every process is started through corral's spawn helper (`spawnHelper.ts`: no
 * fork of the supervising process; pid, output and exit over the helper's pipe) and watched with
 * corral's /proc reads (`processWatch.ts`: one scan of /proc per 100 ms shared by all running
 * processes, the scan at the exit for the group and its strays) — without
 * effect, the plan, the protocol files or the output's line handling. CPU: the pool process's own,
 * and that of the helper and the processes it reaped (the helper is stopped, and so reaped, before
 * reading it; what it used before the pool started, its own start, is left out).
 */
const SCRIPT = `
import * as fs from "node:fs"
const [processes, concurrency] = process.argv.slice(1, 3).map(Number)
const argv = JSON.parse(process.argv[3])
const cwd = process.argv[4]
const { sharedHelper } = await import(process.argv[5])
const watch = await import(process.argv[6])
const helper = sharedHelper()
if ((await helper.ready()) === undefined) throw new Error("the spawn helper did not start: " + helper.unavailable)
const running = new Map()
const runOne = () => new Promise((resolve, reject) => {
  let open = 3, pid, strays
  const token = "CORRAL_PROCESS_TOKEN=" + crypto.randomUUID()
  const done = () => {
    if (--open > 0) return
    running.delete(pid)
    // The exit was seen: one scan tells whether the group and the strays are gone, as in corral.
    strays.collect(true)
    helper.release(id)
    resolve()
  }
  const id = helper.spawnAgent({ file: argv[0], args: argv.slice(1), cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, CORRAL_PROCESS_TOKEN: token.slice(21) } }, {
    started: (started, error) => {
      if (started === undefined) return reject(new Error(error.message))
      pid = started
      watch.launchedLeader(pid)
      strays = new watch.Strays(pid, token)
      running.set(pid, strays)
    },
    data: () => {},
    end: done,
    exit: (code) => (code === 0 ? done() : reject(new Error(argv[0] + " exited with " + code))),
    lost: (error) => reject(new Error(error.message))
  })
})
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000 }
const statFields = (file) => { const f = fs.readFileSync(file, "latin1"); return f.slice(f.lastIndexOf(")") + 2).split(" ") }
const children = () => { const x = statFields("/proc/self/stat"); return (Number(x[13]) + Number(x[14])) * 10 }
let next = 0
const worker = async () => { while (next < processes) { next++; await runOne() } }
const helperFields = statFields("/proc/" + helper.pid + "/stat")
const helperStart = (Number(helperFields[11]) + Number(helperFields[12]) + Number(helperFields[13]) + Number(helperFields[14])) * 10
const own = cpu(), kids = children() + helperStart, start = performance.now()
const scans = setInterval(() => { for (const [pid, strays] of running) { watch.sampleGroup(pid); strays.track() } }, 100)
await Promise.all(Array.from({ length: concurrency }, worker))
clearInterval(scans)
const ms = performance.now() - start, ownMs = cpu() - own
await helper.stop()
process.stdout.write(JSON.stringify({ ms, ownMs, childrenMs: children() - kids }))
`

export const freshSupervisor = (
  processes: number,
  concurrency: number,
  argv: ReadonlyArray<string>,
  cwd: string = process.cwd()
): Promise<FreshPoolRun> =>
  runFresh([
    "--input-type=module",
    "-e",
    SCRIPT,
    String(processes),
    String(concurrency),
    JSON.stringify(argv),
    cwd,
    internal("spawnHelper.ts"),
    internal("processWatch.ts")
  ])
