import { NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import * as ProcessRunner from "../packages/platform-node/src/ProcessRunner.ts"
const NODE = process.execPath
const show = (label: string, spec: ProcessRunner.ProcessSpec) => Effect.gen(function* () {
  const t = Date.now()
  const e = yield* Effect.flip(ProcessRunner.run(spec))
  console.log(label, Date.now() - t, "ms |", e.message, "|", e.signal, e.exitCode)
})
Effect.runPromise(Effect.gen(function* () {
  yield* show("cpu", { command: NODE, args: ["-e", "for(;;){}"], limits: { cpuSeconds: 1 } })
  yield* show("mem", { command: NODE, args: ["-e", "const k=[]; setInterval(() => k.push(Buffer.alloc(20*1024*1024, 1)), 20)"], limits: { memoryMb: 100 }, name: "hog" })
  yield* show("mem-tree", { command: `${NODE} -e "const k=[]; setInterval(() => k.push(Buffer.alloc(10*1024*1024, 1)), 20)" & ${NODE} -e "const k=[]; setInterval(() => k.push(Buffer.alloc(10*1024*1024, 1)), 20)" & wait`, shell: true, limits: { memoryMb: 150 }, name: "pair" })
  yield* show("out", { command: NODE, args: ["-e", "for(;;) console.log('x'.repeat(100))"], limits: { maxOutputBytes: 1_000_000 } })
  yield* show("spawn-cwd", { command: "ls", cwd: "/nonexistent" })
}).pipe(Effect.provide(NodeServices.layer)))
