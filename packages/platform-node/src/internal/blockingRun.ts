import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"
import * as Effect from "effect/Effect"
import { BlockingFailed, type Spec } from "./blockingError.ts"
import { workerEntry } from "./workerEntry.ts"

export { BlockingFailed, type Spec } from "./blockingError.ts"

const entry = workerEntry("blockingWorker", import.meta.url)

type Reply =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly name: string; readonly message: string }

export const moduleHref = (module: URL | string): string =>
  module instanceof URL
    ? module.href
    : /^[a-z][a-z0-9+.-]*:/i.test(module)
      ? module
      : pathToFileURL(resolve(module)).href

const limitText = (spec: Spec): string => {
  const limits = spec.resourceLimits
  if (limits === undefined) return "the default heap limit"
  return Object.entries(limits)
    .map(([name, value]) => `${name}=${value}`)
    .join(", ")
}

const failure = (spec: Spec, error: unknown): BlockingFailed => {
  const code = (error as { code?: unknown }).code
  if (code === "ERR_WORKER_OUT_OF_MEMORY") {
    return new BlockingFailed({
      reason: "OutOfMemory",
      export: spec.export,
      message: `${spec.export} ran out of memory (limit ${limitText(spec)})`
    })
  }
  const message = error instanceof Error ? error.message : String(error)
  return new BlockingFailed({
    reason: "Crashed",
    export: spec.export,
    message: `${spec.export} crashed its worker: ${message}`
  })
}

const onReply = (spec: Spec, reply: Reply): Effect.Effect<unknown, BlockingFailed> =>
  reply.ok
    ? Effect.succeed(reply.value)
    : Effect.fail(
        new BlockingFailed({
          reason: "Threw",
          export: spec.export,
          message: `${spec.export} threw ${reply.name}: ${reply.message}`
        })
      )

export const runInWorker = (spec: Spec): Effect.Effect<unknown, BlockingFailed> =>
  Effect.callback<unknown, BlockingFailed>((resume) => {
    const worker = new Worker(entry, {
      workerData: { module: moduleHref(spec.module), export: spec.export, input: spec.input },
      ...(spec.resourceLimits === undefined ? {} : { resourceLimits: spec.resourceLimits })
    })
    worker.once("message", (reply: Reply) => resume(onReply(spec, reply)))
    worker.once("error", (error) => resume(Effect.fail(failure(spec, error))))
    worker.once("exit", (code) => resume(Effect.fail(failure(spec, new Error(`worker exited with code ${code}`)))))
    return Effect.promise(() => worker.terminate())
  })
