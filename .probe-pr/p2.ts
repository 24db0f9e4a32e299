import { NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import * as ProcessRunner from "../packages/platform-node/src/ProcessRunner.ts"
import { sampleGroup } from "../packages/platform-node/src/internal/processWatch.ts"
import * as cp from "node:child_process"
const NODE = process.execPath
const t0 = Date.now()
const c = cp.spawn("/bin/sh", ["-c", `${NODE} -e "const b = Buffer.alloc(80*1024*1024, 1); const end = Date.now() + 700; while (Date.now() < end) {}"; echo done`], { detached: true, stdio: "ignore" })
const iv = setInterval(() => console.log(Date.now() - t0, JSON.stringify(sampleGroup(c.pid!, 0))), 50)
c.on("exit", () => { clearInterval(iv); console.log("exit", Date.now() - t0) })
