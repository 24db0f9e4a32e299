/**
 * What a `corral/process` agent may reach on its runner, as `AgentIsolation` decides it for a local
 * run: its private folders, its per-agent SQLite file, and its sandbox (the workspace and its private
 * folders read-write, the repository's git folder read-only, the plan's `allow` paths against the
 * runner's repository, the runner's state folder hidden when it lies inside a folder the sandbox
 * shows: the repository an `isolation: none` agent runs in, or an `allow` path such as `..` from a
 * runner whose `--repo` is a subfolder).
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { type ProcessRunner, Sandbox, type Workspace } from "@corral/platform-node"

/** The sandbox part of a `corral/process` input. */
export interface SandboxSettings {
  readonly network: boolean | "loopback"
  readonly allow: {
    readonly read: ReadonlyArray<string>
    readonly write: ReadonlyArray<string>
    readonly ports: ReadonlyArray<number>
  }
}

/** The name of an agent's own SQLite file in its private data folder (as in a local run). */
export const databaseFile = "agent.db"

/** The plan's sandbox with its paths resolved against the runner's repository. */
export const sandboxOptions = (sandbox: SandboxSettings, repo: string): ProcessRunner.SandboxOptions => ({
  network: sandbox.network,
  allow: {
    read: sandbox.allow.read.map((dir) => NodePath.resolve(repo, dir)),
    write: sandbox.allow.write.map((dir) => NodePath.resolve(repo, dir)),
    ports: sandbox.allow.ports
  }
})

/** The values of `names` in the runner's environment (unset ones left out). */
export const passed = (names: ReadonlyArray<string> | undefined): Record<string, string> =>
  Object.fromEntries(
    (names ?? []).flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]]))
  )

const privateDirsOf = (env: Readonly<Record<string, string>>): ReadonlyArray<string> =>
  [
    env.CORRAL_AGENT_DIR,
    env.TMPDIR,
    env.XDG_CACHE_HOME === undefined ? undefined : NodePath.dirname(env.XDG_CACHE_HOME)
  ].filter((dir): dir is string => dir !== undefined)

/** The runner's folder of workspaces, run leases and private folders in `repo`. */
const stateDirOf = (repo: string) => NodePath.join(NodePath.resolve(repo), ".corral")

/**
 * The isolation of an agent in the workspace `handle` on the runner whose repository is `repo` and
 * state folder `stateDir` (`undefined`: `<repo>/.corral`).
 */
export const of = (
  input: { readonly sandbox?: SandboxSettings | undefined; readonly database?: "per-agent" | undefined },
  handle: Workspace.WorkspaceHandle,
  repo: string,
  stateDir: string | undefined
): {
  readonly env: Readonly<Record<string, string>>
  readonly privateDirs: ReadonlyArray<string>
  readonly sandbox: ProcessRunner.SandboxOptions | undefined
} => {
  const privateDirs = privateDirsOf(handle.env)
  const dataDir = handle.env.CORRAL_AGENT_DIR
  let env: Record<string, string> = {}
  if (input.database === "per-agent" && dataDir !== undefined) {
    const file = NodePath.join(dataDir, databaseFile)
    NodeFs.closeSync(NodeFs.openSync(file, "a"))
    env = { CORRAL_AGENT_DB: file, DATABASE_URL: `file:${file}` }
  }
  if (input.sandbox === undefined) return { env, privateDirs, sandbox: undefined }
  const options = sandboxOptions(input.sandbox, repo)
  const git = Sandbox.commonGitDir(handle.dir)
  const state = NodePath.resolve(stateDir ?? stateDirOf(repo))
  const visible = [handle.dir, ...(options.allow?.read ?? []), ...(options.allow?.write ?? [])]
  const hide = Sandbox.hideWithin(state, visible)
  return {
    env,
    privateDirs,
    sandbox: {
      ...options,
      hide,
      allow: { ...options.allow, read: [...(git === undefined ? [] : [git]), ...(options.allow?.read ?? [])] }
    }
  }
}
