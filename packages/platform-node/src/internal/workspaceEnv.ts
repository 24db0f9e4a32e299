import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { PortsExhausted } from "./workspaceErrors.ts"
import { makeDir } from "./workspaceFs.ts"

export const lockfileNames = ["pnpm-lock.yaml", "package-lock.json", "yarn.lock", "Cargo.lock", "uv.lock"] as const

export interface PortConfig {
  readonly base: number
  readonly size: number
  readonly blocks: number
}

export interface PortBlock {
  readonly first: number
  readonly count: number
  /**
   * Set on the first block of this allocator that could not be held machine-wide: what to tell the
   * user (the block, and why it is private to this process only).
   */
  readonly warning?: string | undefined
}

export const lockfileHash = (dir: string) =>
  Effect.promise(async () => {
    const hash = createHash("sha256")
    let found = false
    for (const name of lockfileNames) {
      const content = await fs.readFile(path.join(dir, name)).catch(() => undefined)
      if (content === undefined) continue
      found = true
      hash.update(name).update("\0").update(content).update("\0")
    }
    return found ? hash.digest("hex") : "none"
  })

export const namespaceOf = (parts: { readonly lockHash: string; readonly agentId: string }): string =>
  createHash("sha256")
    .update(JSON.stringify([process.platform, process.arch, process.version, parts.lockHash, parts.agentId]))
    .digest("hex")
    .slice(0, 16)

/** How {@link holdBlock} ended: held by a server, taken by another process, or `unavailable` (why). */
type Hold = net.Server | "taken" | { readonly unavailable: string }

/**
 * Holds port block `first` for this process across the machine: a socket in Linux's abstract
 * namespace named after it, which one process at a time can bind and the kernel frees when that
 * process ends (`kill -9` included), so no lock file is left behind. `"taken"` when another process
 * holds it; `unavailable` with the error's code when the socket cannot be made (any other error,
 * `EMFILE` for one, or a sandbox that refuses it: the block is then private within this process
 * only, as where abstract sockets do not exist). The namespace is the network namespace's, as ports
 * are: shared by every user, separate in a sandbox with a network of its own.
 */
const holdBlock = (first: number): Effect.Effect<Hold> =>
  Effect.callback((resume) => {
    const server = net.createServer()
    server.once("error", (error: NodeJS.ErrnoException) =>
      resume(
        Effect.succeed(
          error.code === "EADDRINUSE"
            ? "taken"
            : { unavailable: `cannot make the abstract socket @corral-ports-${first} (${error.code ?? error.message})` }
        )
      )
    )
    server.listen(`\0corral-ports-${first}`, () => {
      server.unref()
      resume(Effect.succeed(server))
    })
  })

const hold: (first: number) => Effect.Effect<Hold> =
  process.platform === "linux"
    ? holdBlock
    : () => Effect.succeed({ unavailable: "abstract sockets, which keep blocks apart, exist only on Linux" })

const privateWarning = (first: number, size: number, reason: string) =>
  `port block ${first}-${first + size - 1} is private to this corral process only, not machine-wide: ${reason}; another corral process on this machine may give its agents the same ports`

export const makePortAllocator = (config: PortConfig) => {
  const used = new Set<number>()
  let warned = false
  const take = (agentId: string) =>
    Effect.gen(function* () {
      for (let index = 0; index < config.blocks; index++) {
        if (used.has(index)) continue
        used.add(index)
        const first = config.base + index * config.size
        const held = yield* hold(first)
        if (held === "taken") {
          used.delete(index)
          continue
        }
        if (held instanceof net.Server) return { index, held, warning: undefined }
        const warning = warned ? undefined : privateWarning(first, config.size, held.unavailable)
        warned = true
        return { index, held: undefined, warning }
      }
      return yield* new PortsExhausted({ agentId, blocks: config.blocks })
    })
  return (agentId: string): Effect.Effect<PortBlock, PortsExhausted, Scope.Scope> =>
    Effect.acquireRelease(take(agentId), ({ index, held }) =>
      Effect.andThen(
        held === undefined
          ? Effect.void
          : Effect.callback<void>((resume) => {
              held.close(() => resume(Effect.void))
            }),
        Effect.sync(() => used.delete(index))
      )
    ).pipe(
      Effect.map(({ index, warning }) => ({ first: config.base + index * config.size, count: config.size, warning }))
    )
}

export interface AgentDirs {
  readonly agentDir: string
  readonly dataDir: string
  readonly tmpDir: string
  readonly cacheDir: string
}

export const agentDirs = (stateDir: string, runId: string, agentId: string, namespace: string): AgentDirs => {
  const agentDir = path.join(stateDir, "agents", runId, agentId)
  return {
    agentDir,
    dataDir: path.join(agentDir, "data"),
    tmpDir: path.join(agentDir, "tmp"),
    cacheDir: path.join(stateDir, "cache", namespace)
  }
}

export const makeAgentDirs = (dirs: AgentDirs) =>
  Effect.forEach(
    [dirs.dataDir, dirs.tmpDir, path.join(dirs.cacheDir, "xdg"), path.join(dirs.cacheDir, "pycache")],
    makeDir,
    { discard: true }
  )

export const agentEnv = (input: {
  readonly dirs: AgentDirs
  readonly ports: PortBlock
  readonly namespace: string
  readonly runId: string
  readonly agentId: string
  readonly workspaceDir: string
}): Record<string, string> => ({
  PORT: String(input.ports.first),
  CORRAL_PORT_BASE: String(input.ports.first),
  CORRAL_PORT_COUNT: String(input.ports.count),
  CORRAL_RUN_ID: input.runId,
  CORRAL_AGENT_ID: input.agentId,
  CORRAL_WORKSPACE: input.workspaceDir,
  CORRAL_AGENT_DIR: input.dirs.dataDir,
  CORRAL_NAMESPACE: input.namespace,
  TMPDIR: input.dirs.tmpDir,
  TMP: input.dirs.tmpDir,
  TEMP: input.dirs.tmpDir,
  CARGO_TARGET_DIR: path.join(input.dirs.cacheDir, "cargo-target"),
  PYTHONPYCACHEPREFIX: path.join(input.dirs.cacheDir, "pycache"),
  XDG_CACHE_HOME: path.join(input.dirs.cacheDir, "xdg")
})

export const hostname = (): string => os.hostname()
