import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { NodeServices } from "@effect/platform-node"
import * as RunLedger from "@corral/platform-node/RunLedger"
import { Workspace } from "@corral/platform-node/Workspace"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as PlanFile from "../src/PlanFile.ts"
import type { RunEvent } from "../src/RunEvent.ts"
import * as RunPlan from "../src/RunPlan.ts"

const sh = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, LC_ALL: "C" } }).trim()

const makeRepo = (files: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "corral-runplan-")))
      sh(root, "init", "--quiet", "--initial-branch=main")
      sh(root, "config", "user.name", "Repo Owner")
      sh(root, "config", "user.email", "owner@example.test")
      for (const [file, text] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true })
        fs.writeFileSync(path.join(root, file), text)
      }
      sh(root, "add", ".")
      sh(root, "commit", "--quiet", "-m", "initial")
      return root
    }),
    (root) => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true }))
  )

/** The real `Workspace` layer with some of its operations wrapped by `wrap`. */
const wrappedWorkspace = (wrap: (real: Workspace["Service"]) => Partial<Workspace["Service"]>) =>
  Layer.effect(
    Workspace,
    Effect.gen(function* () {
      const real = yield* Workspace
      return Workspace.of({ ...real, ...wrap(real) })
    })
  ).pipe(Layer.provide(Workspace.layer))

/** The real `Workspace` layer, recording each `acquire` and `closePool` in `calls`. */
const recordingWorkspace = (calls: Array<string>) =>
  wrappedWorkspace((real) => ({
    acquire: (options) =>
      real.acquire(options).pipe(Effect.tap(() => Effect.sync(() => calls.push(`acquire ${options.agentId}`)))),
    closePool: (runId) =>
      real.closePool(runId).pipe(Effect.tap(() => Effect.sync(() => calls.push(`closePool ${runId}`))))
  }))

const runPlan = (
  repo: string,
  yaml: string,
  events: Array<RunEvent>,
  runId = "r1",
  more: Pick<RunPlan.Options, "ledger" | "lineage" | "base"> = {}
) =>
  Effect.gen(function* () {
    const plan = yield* PlanFile.decode(yaml, { path: path.join(repo, "plan.yaml") })
    return yield* RunPlan.run({
      plan,
      repo,
      stateDir: path.join(repo, ".corral"),
      runId,
      onEvent: (event) => events.push(event),
      ...more
    })
  }).pipe(Effect.scoped)

const tags = (events: ReadonlyArray<RunEvent>, tag: string) => events.filter((event) => event._tag === tag)

/** Workspace with the real service, whose release of `agentId`'s workspace waits for `gate`. */
const gatedWorkspace = (agentId: string, gate: Deferred.Deferred<void>) =>
  wrappedWorkspace((real) => ({
    acquire: (options) =>
      real
        .acquire(options)
        .pipe(
          Effect.tap(() =>
            options.agentId === agentId ? Effect.addFinalizer(() => Deferred.await(gate)) : Effect.void
          )
        )
  }))

const lcg = (seed: number) => {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

describe("RunPlan", () => {
  it.live("an agent's slot is free once its work is merged; its workspace is released afterwards", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const gate = yield* Deferred.make<void>()
      const events: Array<RunEvent> = []
      const plan = [
        "concurrency: 1",
        "agents:",
        "  - id: first",
        "    run: echo one > one.txt",
        "  - id: second",
        "    run: echo two > two.txt",
        "    dependsOn: [first]"
      ].join("\n")
      const fiber = yield* runPlan(repo, plan, events).pipe(
        Effect.provide(gatedWorkspace("first", gate)),
        Effect.forkChild
      )
      const firstDir = path.join(repo, ".corral", "worktrees", "r1", "first")
      yield* Effect.promise(async () => {
        while (!events.some((e) => e._tag === "Merged" && e.agentId === "second"))
          await new Promise((r) => setTimeout(r, 20))
      })
      assert.isFalse(fs.existsSync(firstDir), "the first's worktree went to the second at the first's commit")
      assert.notStrictEqual(sh(repo, "branch", "--list", "corral/r1/first"), "", "the first's release is still gated")
      yield* Deferred.succeed(gate, undefined)
      const report = yield* Fiber.join(fiber)
      assert.isTrue(report.result.allSucceeded)
      assert.isFalse(fs.existsSync(firstDir))
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
      assert.strictEqual(sh(repo, "branch", "--list", "corral/r1/first"), "")
      assert.isAbove(report.git.first!.commands, 0)
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("the run closes its worktree pool once, after every agent has had its workspace", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const calls: Array<string> = []
      const recording = recordingWorkspace(calls)
      const plan = [
        "concurrency: 2",
        "agents:",
        "  - id: a",
        "    run: echo a > a.txt",
        "  - id: b",
        "    run: echo b > b.txt",
        "  - id: last",
        "    run: cat a.txt b.txt > last.txt",
        "    dependsOn: [a, b]"
      ].join("\n")
      const report = yield* runPlan(repo, plan, []).pipe(Effect.provide(recording))
      assert.isTrue(report.result.allSucceeded)
      assert.deepStrictEqual(
        calls.filter((call) => call.startsWith("closePool")),
        ["closePool r1"]
      )
      assert.strictEqual(calls.indexOf("closePool r1"), calls.indexOf("acquire last") + 1)
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
      assert.strictEqual(
        sh(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/corral/"),
        "corral/r1/integration"
      )
      assert.strictEqual(sh(repo, "show", "corral/r1/integration:last.txt"), "a\nb")
    }).pipe(Effect.provide(NodeServices.layer))
  )

  it.live("a resumed run whose cached agents never acquire closes its pool after the last agent that runs", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const ledger = yield* Effect.service(RunLedger.RunLedger)
      const calls: Array<string> = []
      const recording = recordingWorkspace(calls)
      const first = ["agents:", "  - id: a", "    run: echo a > a.txt"]
      const r1 = yield* runPlan(repo, first.join("\n"), [], "r1", { ledger }).pipe(Effect.provide(Workspace.layer))
      assert.isTrue(r1.result.allSucceeded)
      const events: Array<RunEvent> = []
      const second = [...first, "  - id: b", "    run: cat a.txt > b.txt"].join("\n")
      const r2 = yield* runPlan(repo, second, events, "r2", { ledger, lineage: "r1", base: r1.integrationHead }).pipe(
        Effect.provide(recording)
      )
      assert.isTrue(r2.result.allSucceeded)
      const a = r2.result.get("a")
      assert.isTrue(a?._tag === "Succeeded" && a.cached, "a is reused, not run")
      assert.deepStrictEqual(calls, ["acquire b", "closePool r2"])
      assert.strictEqual(sh(repo, "show", "corral/r2/integration:b.txt"), "a")
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(RunLedger.layerMemory))
  )

  it.live("no conflict is predicted between many agents that write disjoint folders (seeded)", () =>
    Effect.gen(function* () {
      const random = lcg(20_261_126)
      const files: Record<string, string> = {}
      for (let d = 0; d < 16; d++) for (let f = 0; f < 20; f++) files[`pkg${d}/f${f}.txt`] = `${d}-${f}\n`
      const repo = yield* makeRepo(files)
      const agents = Array.from({ length: 16 }, (_, d) => {
        const touched = Array.from({ length: 1 + Math.floor(random() * 5) }, () => Math.floor(random() * 20))
        const edits = touched.map((f) => `echo agent${d} >> pkg${d}/f${f}.txt`).join(" && ")
        return [
          `  - id: a${d}`,
          `    run: ${edits} && echo new > pkg${d}/new.txt`,
          `    claims: { write: [pkg${d}/] }`
        ].join("\n")
      })
      const events: Array<RunEvent> = []
      const report = yield* runPlan(repo, ["concurrency: 4", "agents:", ...agents].join("\n"), events)
      assert.isTrue(report.result.allSucceeded)
      assert.deepStrictEqual(tags(events, "ConflictPredicted"), [])
      assert.strictEqual(tags(events, "Merged").length, 16)
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )

  it.live("a retried agent gets a fresh workspace once its previous attempt's is released", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const counter = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "corral-attempts-")), "n")
      const command = `echo attempt >> ${counter}; [ $(wc -l < ${counter}) -ge 3 ] && echo done > done.txt`
      const plan = ["agents:", "  - id: flaky", `    run: ${JSON.stringify(command)}`, "    retries: 2"].join("\n")
      const report = yield* runPlan(repo, plan, [])
      assert.isTrue(report.result.allSucceeded, JSON.stringify(report.result.failed))
      assert.strictEqual(report.result.get("flaky")!.attempts, 3)
      assert.strictEqual(sh(repo, "show", `${report.integrationBranch}:done.txt`), "done")
      assert.strictEqual(sh(repo, "worktree", "list", "--porcelain").split("\n\n").length, 1)
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )

  // Whether the warning comes first depends on whether the other agent has merged yet (a conflict with
  // merged work is the merge's to report); the prediction itself is tested deterministically in
  // packages/platform-node/test/Workspace.test.ts.
  it.live("a real overlap: any early warning names both agents and the file, and the merge reports it", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "shared.txt": "base\n" })
      const events: Array<RunEvent> = []
      const plan = [
        "concurrency: 2",
        "agents:",
        "  - id: left",
        "    run: echo left > shared.txt",
        "  - id: right",
        "    run: echo right > shared.txt"
      ].join("\n")
      const report = yield* runPlan(repo, plan, events)
      assert.isFalse(report.result.allSucceeded)
      const predicted = tags(events, "ConflictPredicted") as Array<Extract<RunEvent, { _tag: "ConflictPredicted" }>>
      for (const p of predicted) {
        assert.deepStrictEqual(p.paths, ["shared.txt"])
        assert.deepStrictEqual([...p.agents].sort(), ["left", "right"])
      }
      assert.strictEqual(tags(events, "MergeConflict").length, 1)
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )

  const historyPlan = (history: string, extra: ReadonlyArray<string> = []) =>
    [
      `history: ${history}`,
      ...extra,
      "concurrency: 2",
      "agents:",
      "  - id: one",
      "    run: echo one > one.txt",
      "  - id: two",
      `    run: ${JSON.stringify("echo two > two.txt && git add two.txt && git -c user.name=Agent -c user.email=agent@x commit -qm 'two: first' && echo more >> two.txt")}`,
      "  - id: three",
      "    run: echo three > three.txt",
      "    dependsOn: [one, two]"
    ].join("\n")

  const landed = (repo: string, branch: string) =>
    sh(
      repo,
      "log",
      "--format=%H %P%x09%an <%ae>%x09%cn <%ce>%x09%(trailers:key=Corral-Agent,valueonly,separator=%x2C)",
      `main..${branch}`
    )
      .split("\n")
      .map((line) => {
        const [ids = "", author = "", committer = "", agent = ""] = line.split("\t")
        const [, ...parents] = ids.split(" ")
        return { parents: parents.length, author, committer, agent }
      })

  it.live("history: merge lands each agent with a merge commit (or a fast-forward), by the user's identity", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const report = yield* runPlan(repo, historyPlan("merge"), [])
      assert.isTrue(report.result.allSucceeded)
      const commits = landed(repo, report.integrationBranch!)
      assert.isTrue(
        commits.some((c) => c.parents === 2),
        "at least one agent landed with a merge commit"
      )
      assert.sameMembers(
        commits.map((c) => c.author),
        [...commits.map(() => "Repo Owner <owner@example.test>").slice(1), "Agent <agent@x>"]
      )
      assert.includeMembers([...new Set(commits.map((c) => c.agent))], ["one", "two", "three"])
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )

  it.live("history: squash lands one single-parent commit per agent, by the configured author", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const identity = [
        "author: { name: Bot Author, email: bot@example.test }",
        "committer: { name: Release Manager, email: rm@example.test }"
      ]
      const report = yield* runPlan(repo, historyPlan("squash", identity), [])
      assert.isTrue(report.result.allSucceeded)
      const commits = landed(repo, report.integrationBranch!)
      assert.strictEqual(commits.length, 3)
      for (const c of commits) {
        assert.strictEqual(c.parents, 1)
        assert.strictEqual(c.author, "Bot Author <bot@example.test>")
        assert.strictEqual(c.committer, "Release Manager <rm@example.test>")
      }
      assert.sameMembers(
        commits.map((c) => c.agent),
        ["one", "two", "three"]
      )
      assert.strictEqual(sh(repo, "show", `${report.integrationBranch}:two.txt`), "two\nmore")
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )

  it.live("history: linear replays every agent commit without merge commits, keeping each commit's author", () =>
    Effect.gen(function* () {
      const repo = yield* makeRepo({ "README.md": "x\n" })
      const report = yield* runPlan(repo, historyPlan("linear"), [])
      assert.isTrue(report.result.allSucceeded)
      const commits = landed(repo, report.integrationBranch!)
      assert.strictEqual(commits.length, 4)
      for (const c of commits) assert.strictEqual(c.parents, 1)
      const two = commits.filter((c) => c.agent === "two")
      assert.sameMembers(
        two.map((c) => c.author),
        ["Agent <agent@x>", "Repo Owner <owner@example.test>"]
      )
      assert.strictEqual(sh(repo, "show", `${report.integrationBranch}:two.txt`), "two\nmore")
      assert.strictEqual(sh(repo, "show", `${report.integrationBranch}:one.txt`), "one")
      assert.strictEqual(sh(repo, "show", `${report.integrationBranch}:three.txt`), "three")
    }).pipe(Effect.provide(NodeServices.layer), Effect.provide(Workspace.layer))
  )
})

describe("sparseFolders", () => {
  const agent = (read: ReadonlyArray<string>, write: ReadonlyArray<string>, inputs: ReadonlyArray<string>) =>
    ({ claims: { read, write }, inputs }) as unknown as PlanFile.PlanAgent

  it("takes each claimed path's folder and each input's fixed prefix, up to the first glob", () => {
    assert.deepStrictEqual(
      RunPlan.sparseFolders(
        agent(
          ["docs/guide.md", "db:users", "./lib//util/"],
          ["src/pkg0/", "CHANGELOG.md", "src/**/gen.ts", "pkg/[ab]/x.ts"],
          ["fixtures/*.json", "*.md", "test/unit/**"]
        )
      ),
      ["docs", "lib/util", "src/pkg0", "src", "pkg", "fixtures", "test/unit"]
    )
  })

  it("is undefined when only top-level files and named resources are claimed", () => {
    assert.isUndefined(RunPlan.sparseFolders(agent(["README.md"], ["db:users", "CHANGELOG.md"], ["*.json"])))
  })
})
