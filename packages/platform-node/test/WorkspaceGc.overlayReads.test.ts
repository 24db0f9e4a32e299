import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { vi } from "vitest"
import { overlayProblem } from "../src/internal/workspaceOverlay.ts"
import { Workspace } from "../src/Workspace.ts"
import { killWhenReady, workspaceModule } from "./support/killedRun.ts"

/** The files gc's module reads, in order (`fs.readFile` of `node:fs/promises`, counted and passed on). */
const reads = vi.hoisted(() => [] as Array<string>)
vi.mock("node:fs/promises", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs/promises")>()
  const passOn = real.readFile as (...args: Array<unknown>) => unknown
  const readFile = ((file: unknown, ...rest: Array<unknown>) => {
    reads.push(String(file))
    return passOn(file, ...rest)
  }) as typeof real.readFile
  return { ...real, default: { ...real, readFile }, readFile }
})

// With CI=true a machine that cannot mount an overlay runs these tests and fails them; elsewhere they are skipped.
const enabled = overlayProblem() === undefined || process.env.CI === "true"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const makeRepo = Effect.acquireRelease(
  Effect.sync(() => {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-gc-reads-")))
    sh(root, "init", "--quiet", "--initial-branch=main")
    fs.writeFileSync(path.join(root, "a.txt"), "a\n")
    sh(root, "add", ".")
    sh(root, "-c", "user.name=test", "-c", "user.email=test@test", "commit", "--quiet", "-m", "initial")
    return root
  }),
  (root) => Effect.sync(() => execFileSync("rm", ["-rf", root]))
)

/** A run that sets up three overlay agents, one of which writes a file it never commits, and waits to be killed. */
const threeAgents = `
import { execFileSync } from "node:child_process"
import * as Effect from "effect/Effect"
import { overlayPrefix, Workspace } from ${JSON.stringify(workspaceModule)}
const repo = process.env.CORRAL_TEST_REPO
const program = Effect.gen(function* () {
  const ws = yield* Workspace
  yield* ws.registerRun(repo, "lost")
  const acquire = (agentId) => ws.acquire({ repo, runId: "lost", agentId, overlay: true })
  const wrote = yield* acquire("wrote")
  const [file, ...args] = [...overlayPrefix(wrote), "sh", "-c", "echo wip > wip.txt"]
  execFileSync(file, args, { cwd: wrote.dir })
  yield* acquire("idle-1")
  yield* acquire("idle-2")
  console.log("ready")
  yield* Effect.never
}).pipe(Effect.scoped, Effect.provide(Workspace.layer))
Effect.runFork(program)
`

describe.skipIf(!enabled)("Workspace gc of a dead overlay run", () => {
  it.live("reads each agent's base commit once", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo
      yield* killWhenReady(threeAgents, { CORRAL_TEST_REPO: repo })
      reads.length = 0
      const report = yield* Effect.gen(function* () {
        const ws = yield* Workspace
        return yield* ws.gc({ repo })
      }).pipe(Effect.provide(Workspace.layer), Effect.scoped)
      assert.deepStrictEqual(
        report.kept.filter((item) => item.kind === "worktree").map((item) => path.basename(item.target)),
        ["wrote"]
      )
      const agents = path.join(repo, ".corral", "overlay", "lost", "agents")
      assert.deepStrictEqual(reads.filter((file) => file.endsWith(`${path.sep}base`)).sort(), [
        path.join(agents, "idle-1", "base"),
        path.join(agents, "idle-2", "base"),
        path.join(agents, "wrote", "base")
      ])
    })
  )
})
