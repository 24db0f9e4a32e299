/**
 * What a plan agent may reach beyond its workspace: its bubblewrap sandbox (the workspace and its
 * private folders read-write, the repository's `.git` read-only, the plan's `allow` paths) and its
 * per-agent database. Also the machine check that refuses a sandboxed plan where bubblewrap cannot run.
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type * as ProcessRunner from "@corral/platform-node/ProcessRunner"
import * as Sandbox from "@corral/platform-node/Sandbox"
import * as Workspace from "@corral/platform-node/Workspace"
import * as Data from "effect/Data"
import type { Plan, PlanAgent } from "./PlanFile.ts"

/**
 * A sandboxed agent replaced its worktree's `.git` link (the file that tells git where the
 * worktree's repository is). corral runs git in the workspace outside the sandbox, so a link to a
 * repository the agent made could run its commands there (`core.fsmonitor`, hooks); the link is
 * restored before any git command and the agent fails.
 *
 * @since 0.1.0
 * @category errors
 */
export class GitLinkTampered extends Data.TaggedError("GitLinkTampered")<{
  readonly agentId: string
  readonly path: string
}> {
  override get message() {
    return `the sandboxed agent changed ${this.path}; it was restored and the agent's work is not committed`
  }
}

/**
 * The process settings that isolate one agent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Isolation {
  readonly env: Readonly<Record<string, string>>
  readonly privateDirs: ReadonlyArray<string>
  readonly sandbox: ProcessRunner.SandboxOptions | undefined
}

/**
 * The name of an agent's own SQLite file in its private data folder (`database: per-agent`).
 *
 * @since 0.1.0
 * @category models
 */
export const databaseFile = "agent.db"

const privateDirsOf = (env: Readonly<Record<string, string>>): ReadonlyArray<string> =>
  [
    env.CORRAL_AGENT_DIR,
    env.TMPDIR,
    env.XDG_CACHE_HOME === undefined ? undefined : NodePath.dirname(env.XDG_CACHE_HOME)
  ].filter((dir): dir is string => dir !== undefined)

const databaseEnv = (agent: PlanAgent, dataDir: string | undefined): Record<string, string> => {
  if (agent.database !== "per-agent" || dataDir === undefined) return {}
  const file = NodePath.join(dataDir, databaseFile)
  NodeFs.closeSync(NodeFs.openSync(file, "a"))
  return { CORRAL_AGENT_DB: file, DATABASE_URL: `file:${file}` }
}

/**
 * The isolation of `agent` in the workspace `handle`: sandbox paths resolved against the repository,
 * the repository's `.git` read-only (over a read-write checkout too, with `isolation: none`), the
 * state folder hidden when it lies inside a folder the sandbox shows (the workspace — with
 * `isolation: none` the checkout, which holds it unless `--repo` is a subfolder — or an `allow`
 * path, such as `..` from a subfolder), and the per-agent database file created (empty) in the
 * agent's data folder.
 *
 * @since 0.1.0
 * @category isolation
 */
export const of = (
  agent: PlanAgent,
  handle: Workspace.WorkspaceHandle,
  paths: { readonly repo: string; readonly stateDir: string }
): Isolation => {
  const privateDirs = privateDirsOf(handle.env)
  const env = databaseEnv(agent, handle.env.CORRAL_AGENT_DIR)
  if (agent.sandbox === undefined) return { env, privateDirs, sandbox: undefined }
  const git = handle.strategy === "directory" ? undefined : Sandbox.commonGitDir(handle.dir)
  const resolve = (dir: string) => NodePath.resolve(paths.repo, dir)
  const read = agent.sandbox.allow.read.map(resolve)
  const write = agent.sandbox.allow.write.map(resolve)
  const hide = Sandbox.hideWithin(paths.stateDir, [handle.dir, ...read, ...write])
  return {
    env,
    privateDirs,
    sandbox: {
      hide,
      network: agent.sandbox.network,
      allow: { read: [...(git === undefined ? [] : [git]), ...read], write, ports: agent.sandbox.allow.ports }
    }
  }
}

/**
 * Why this machine cannot run the plan's sandboxes (naming the agents and how to install bubblewrap),
 * or `undefined` when it can or when no agent asks for one.
 *
 * @since 0.1.0
 * @category isolation
 */
export const unsupported = (
  plan: Plan,
  machine?: Sandbox.Support,
  overlayProblem: () => string | undefined = Workspace.overlayProblem
): string | undefined => {
  const overlaid = plan.agents.filter((agent) => agent.overlay)
  if (overlaid.length > 0) {
    const ids = overlaid.map((agent) => agent.id).join(", ")
    const both = overlaid.filter((agent) => agent.sandbox !== undefined)
    if (both.length > 0) {
      return `agents ${both.map((agent) => agent.id).join(", ")} ask for an overlay workspace and a sandbox; corral does not combine them yet: drop one (a sandbox from \`defaults\` counts)`
    }
    if (plan.isolation !== "worktree")
      return `agents ${ids} ask for an overlay workspace, which needs isolation: worktree`
    const problem = overlayProblem()
    if (problem !== undefined) return `agents ${ids} ask for an overlay workspace, but ${problem}`
  }
  const sandboxed = plan.agents.filter((agent) => agent.sandbox !== undefined)
  if (sandboxed.length === 0) return undefined
  const support = machine ?? Sandbox.supportUnsafe()
  const ids = sandboxed.map((agent) => agent.id).join(", ")
  if (!support.available) return `agents ${ids} ask for a sandbox, but ${support.detail}`
  const offline = sandboxed.filter((agent) => agent.sandbox?.network !== true)
  if (offline.length > 0 && !support.network) {
    return `agents ${offline.map((agent) => agent.id).join(", ")} ask for their own network, but ${support.detail}`
  }
  return undefined
}

/**
 * One line for `corral validate`: what the machine supports.
 *
 * @since 0.1.0
 * @category isolation
 */
export const describeSupport = (support: Sandbox.Support = Sandbox.supportUnsafe()): string =>
  support.available
    ? `sandbox: available (${support.detail}${support.network ? ", network namespaces" : ""})`
    : `sandbox: not available (${support.detail})`

/**
 * Watches the worktree's `.git` link of a sandboxed agent (`Sandbox.guardGitLink`).
 *
 * @since 0.1.0
 * @category isolation
 */
export const guardGitLink = Sandbox.guardGitLink
