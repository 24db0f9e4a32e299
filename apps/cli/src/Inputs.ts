/**
 * Content hashes of the files an agent declares as `inputs`, at a commit: the part of an agent's
 * cache key that makes a rerun skip agents whose inputs did not change.
 *
 * @since 0.1.0
 */
import * as Git from "@corral/platform-node/Git"
import * as Effect from "effect/Effect"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import type { Plan } from "./PlanFile.ts"

/**
 * sha256 over `git ls-files --stage -- <inputs>` (modes, blob ids and paths) of the commit, read
 * into a temporary index (`git ls-tree` takes no glob pathspecs), for every agent with inputs.
 * Patterns are git glob pathspecs relative to the repository's top (`src/**\/*.ts`).
 *
 * @since 0.1.0
 * @category hashing
 */
export const hashes = (repo: string, commit: string, plan: Plan) =>
  Effect.gen(function* () {
    const out: Record<string, string> = {}
    const agents = plan.agents.filter((agent) => agent.inputs.length > 0)
    if (agents.length === 0) return out
    const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "corral-inputs-"))
    const env = { GIT_INDEX_FILE: NodePath.join(dir, "index") }
    return yield* Effect.gen(function* () {
      yield* Git.run(["read-tree", commit], { cwd: repo, env })
      for (const agent of agents) {
        const listing = yield* Git.run(
          ["ls-files", "--stage", "--", ...agent.inputs.map((pattern) => `:(top,glob)${pattern}`)],
          { cwd: repo, env }
        )
        out[agent.id] = NodeCrypto.createHash("sha256").update(listing).digest("hex").slice(0, 16)
      }
      return out
    }).pipe(Effect.ensuring(Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))))
  })
