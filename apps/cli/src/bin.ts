#!/usr/bin/env node
/**
 * The `corral` executable. Most of a short run's start-up is compiling the command's modules, so it
 * turns on Node's on-disk compile cache (`module.enableCompileCache`, in the system's temporary
 * folder; `NODE_DISABLE_COMPILE_CACHE=1` turns it off) before it loads them (`main.ts`).
 */
import * as NodeModule from "node:module"

NodeModule.enableCompileCache?.()
await import("./main.ts")
