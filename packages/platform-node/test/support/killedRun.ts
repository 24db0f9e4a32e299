import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"

/**
 * Runs a script of this package in a child Node process and kills it (SIGKILL) when it prints
 * `ready`: a run that dies without releasing anything, for the tests of what gc finds afterwards.
 */

const packageDir = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))))

/** The `file:` address of `src/Workspace.ts`, for a script's `import`. */
export const workspaceModule = pathToFileURL(path.join(packageDir, "src", "Workspace.ts")).href

/** Runs `script` (an ES module) with `env` added; succeeds once it was killed after printing `ready`. */
export const killWhenReady = (script: string, env: Record<string, string>) =>
  Effect.callback<void, Error>((resume) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: packageDir,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) child.kill("SIGKILL")
    })
    child.on("exit", (_code, signal) =>
      resume(signal === "SIGKILL" ? Effect.void : Effect.fail(new Error(`child exited early: ${stderr}`)))
    )
  })
