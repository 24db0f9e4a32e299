import * as fs from "node:fs"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Folder from "../Folder.ts"
import type * as Scope from "effect/Scope"

export interface LogWriter {
  readonly write: (text: string) => Effect.Effect<void>
}

const noop: LogWriter = { write: () => Effect.void }

const open = (file: string): Effect.Effect<fs.WriteStream, Error> =>
  Effect.callback<fs.WriteStream, Error>((resume) => {
    try {
      Folder.makeSync(path.dirname(file))
    } catch (error) {
      resume(Effect.fail(error as Error))
      return
    }
    const stream = fs.createWriteStream(file, { flags: "w" })
    stream.once("error", (error) => resume(Effect.fail(error)))
    stream.once("ready", () => {
      stream.removeAllListeners("error")
      stream.on("error", () => stream.destroy())
      resume(Effect.succeed(stream))
    })
  })

const close = (stream: fs.WriteStream): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (stream.closed || stream.destroyed) return resume(Effect.void)
    stream.once("close", () => resume(Effect.void))
    stream.end()
  })

const write =
  (stream: fs.WriteStream) =>
  (text: string): Effect.Effect<void> =>
    Effect.callback<void>((resume) => {
      if (text === "" || stream.destroyed || stream.writableEnded) return resume(Effect.void)
      if (stream.write(text)) return resume(Effect.void)
      const done = () => {
        stream.off("drain", done)
        stream.off("close", done)
        resume(Effect.void)
      }
      stream.on("drain", done)
      stream.on("close", done)
    })

export const openLog = (file: string | undefined): Effect.Effect<LogWriter, Error, Scope.Scope> =>
  file === undefined
    ? Effect.succeed(noop)
    : Effect.acquireRelease(open(file), close).pipe(Effect.map((stream) => ({ write: write(stream) })))
