/**
 * Content hashes of the files an agent declares as `inputs`, at a commit: the part of an agent's
 * cache key that makes a rerun skip agents whose inputs did not change.
 *
 * @since 0.1.0
 */
import * as Git from "@corral/platform-node/Git"
import * as Effect from "effect/Effect"
import * as NodeCrypto from "node:crypto"
import type { Plan } from "./PlanFile.ts"

/**
 * sha256 over `git ls-tree -r <commit> -- <inputs>` (paths and blob ids) for every agent with
 * inputs. Patterns are git glob pathspecs (`src/**\/*.ts`).
 *
 * @since 0.1.0
 * @category hashing
 */
export const hashes = (repo: string, commit: string, plan: Plan) =>
  Effect.gen(function* () {
    const out: Record<string, string> = {}
    for (const agent of plan.agents) {
      if (agent.inputs.length === 0) continue
      const listing = yield* Git.run(
        ["ls-tree", "-r", "--full-tree", commit, "--", ...agent.inputs.map((p) => `:(glob)${p}`)],
        {
          cwd: repo
        }
      )
      out[agent.id] = NodeCrypto.createHash("sha256").update(listing).digest("hex").slice(0, 16)
    }
    return out
  })
