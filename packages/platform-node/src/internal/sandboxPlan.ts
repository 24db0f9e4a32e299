import type { ProcessSpec, SandboxOptions } from "../ProcessRunner.ts"
import { support, unsupported, wrap } from "./sandbox.ts"
import { type Bridge, makeBridge } from "./sandboxBridge.ts"

export interface Sandboxed {
  readonly argv: readonly [string, ...Array<string>]
  /** The host side of `network: "loopback"`, opened by the runner before the spawn. */
  readonly bridge: Bridge | undefined
}

/** The options of `spec.sandbox`, or `undefined` when the process is not sandboxed. */
export const sandboxOptions = (spec: ProcessSpec): SandboxOptions | undefined =>
  spec.sandbox === undefined || spec.sandbox === false ? undefined : spec.sandbox === true ? {} : spec.sandbox

/**
 * The hook of the process plan: `argv` wrapped in bubblewrap when the spec asks for a sandbox, or why
 * that is not possible on this machine (a string).
 */
export const sandboxed = (
  spec: ProcessSpec,
  cwd: string,
  env: Record<string, string>,
  argv: readonly [string, ...Array<string>]
): Sandboxed | string => {
  const options = sandboxOptions(spec)
  if (options === undefined) return { argv, bridge: undefined }
  const found = support()
  const problem = unsupported(options, found)
  if (problem !== undefined) return problem
  const bridge = options.network === "loopback" ? makeBridge(options.allow?.ports ?? []) : undefined
  const wrapped = wrap(
    found.bwrap!,
    argv,
    {
      cwd,
      privateDirs: spec.privateDirs ?? [],
      searchPath: env.PATH,
      home: env.HOME ?? process.env.HOME
    },
    options,
    bridge
  )
  return { argv: wrapped, bridge }
}
