import { NodeServices } from "@effect/platform-node"
import { Effect, Fiber, Deferred, Exit } from "effect"
import * as fs from "node:fs"
import * as ProcessRunner from "../packages/platform-node/src/ProcessRunner.ts"
const state = (pid: number) => { try { const s = fs.readFileSync(`/proc/${pid}/stat`, "latin1"); return s.slice(s.lastIndexOf(")") + 2).split(" ").slice(0, 3).join(" ") } catch { return "gone" } }
const prog = Effect.gen(function* () {
  const pids: number[] = []
  const started = yield* Deferred.make<void>()
  let leader = 0
  const fiber = yield* Effect.forkChild(ProcessRunner.run({ command: "sleep 1000 & echo $!; sleep 1000 & echo $!; wait", shell: true, onLine: ({ text }) => { pids.push(Number(text)); if (pids.length === 2) Deferred.doneUnsafe(started, Exit.void) } }), { startImmediately: true })
  yield* Deferred.await(started)
  console.log("pids", pids, pids.map(state))
  const t = Date.now()
  const timer = setInterval(() => console.log(Date.now() - t, pids.map(state)), 100)
  yield* Fiber.interrupt(fiber)
  clearInterval(timer)
  console.log("interrupt took", Date.now() - t, pids.map(state))
})
Effect.runPromise(prog.pipe(Effect.provide(NodeServices.layer)))
