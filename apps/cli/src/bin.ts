#!/usr/bin/env node
/**
 * The `corral` executable. Most of a short run's start-up is compiling the command's modules, so it
 * turns on Node's on-disk compile cache (`module.enableCompileCache`, in the system's temporary
 * folder; `NODE_DISABLE_COMPILE_CACHE=1` turns it off) before it loads them (`main.ts`). `corral run`
 * starts its spawn helper first, so that the helper boots while the modules load and the run's first
 * git command does not fork this process. A signal before the command's own handlers exist ends it
 * with corral's exit code (`EarlySignals`).
 */
import * as NodeModule from "node:module"
import * as EarlySignals from "./EarlySignals.ts"

EarlySignals.install()
NodeModule.enableCompileCache?.()
if (process.argv[2] === "run") (await import("@corral/platform-node/SpawnHelper")).start()
await import("./main.ts")
