import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as Inputs from "../src/Inputs.ts"
import type { Plan } from "../src/PlanFile.ts"
import { git, makeRepo } from "../../../test/helpers.ts"

const planOf = (agents: Record<string, ReadonlyArray<string>>) =>
  ({ agents: Object.entries(agents).map(([id, inputs]) => ({ id, inputs })) }) as unknown as Plan

const hashesAt = (repo: string, commit: string, plan: Plan) => Effect.runPromise(Inputs.hashes(repo, commit, plan))

describe("Inputs.hashes", () => {
  it("hashes each agent's glob inputs at a commit: unchanged while they are, different after a change", async () => {
    const repo = makeRepo({ "README.md": "# t\n", "src/a.ts": "a\n", "src/deep/b.ts": "b\n", "docs/x.md": "x\n" })
    const plan = planOf({ code: ["src/**/*.ts"], docs: ["docs"], none: [] })
    const first = await hashesAt(repo, "HEAD", plan)
    expect(Object.keys(first).sort()).toEqual(["code", "docs"])
    expect(first.code).not.toBe(first.docs)

    NodeFs.writeFileSync(NodePath.join(repo, "README.md"), "# changed\n")
    git(repo, "commit", "-qam", "not an input")
    expect(await hashesAt(repo, "HEAD", plan)).toEqual(first)

    NodeFs.writeFileSync(NodePath.join(repo, "src/deep/b.ts"), "b2\n")
    git(repo, "commit", "-qam", "an input")
    const changed = await hashesAt(repo, "HEAD", plan)
    expect(changed.code).not.toBe(first.code)
    expect(changed.docs).toBe(first.docs)
    // at an older commit, with uncommitted changes: the commit's content only
    NodeFs.writeFileSync(NodePath.join(repo, "src/a.ts"), "dirty\n")
    expect(await hashesAt(repo, "HEAD~2", plan)).toEqual(first)
  })

  it("fails on a commit that does not exist", async () => {
    const repo = makeRepo()
    const exit = await Effect.runPromiseExit(Inputs.hashes(repo, "no-such-commit", planOf({ a: ["x"] })))
    expect(exit._tag).toBe("Failure")
  })
})
