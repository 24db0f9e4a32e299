import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { describe, expect, it } from "vitest"
import { branches, git, makeRepo, planFile, runCli, tempDir } from "../helpers.ts"

const plan = () => planFile("agents:\n  - id: one\n    run: echo one > one.txt\n")

/** A ledger.db of each kind of damage: random bytes, and a real ledger cut short. */
const damagedLedgers = async (): Promise<Array<[string, Buffer]>> => {
  const random = Buffer.alloc(8192)
  for (let i = 0; i < random.length; i++) random[i] = (i * 7919 + 13) % 251
  const repo = makeRepo()
  const made = await runCli(["run", plan()], { cwd: repo })
  expect(made.code, made.stderr).toBe(0)
  const whole = NodeFs.readFileSync(NodePath.join(repo, ".corral", "ledger.db"))
  return [
    ["random bytes", random],
    ["truncated", whole.subarray(0, 6000)]
  ]
}

/**
 * A script that damages a ledger in use so that its running writer sees it: the WAL is checkpointed
 * into the file, every page but the first is overwritten, and a write from this connection makes the
 * writer drop the pages it has cached.
 */
const ledgerBreaker = (file: string): string => {
  const script = NodePath.join(tempDir("breaker-"), "break.cjs")
  NodeFs.writeFileSync(
    script,
    `const fs = require("node:fs")
const { DatabaseSync } = require("node:sqlite")
const file = ${JSON.stringify(file)}
let db = new DatabaseSync(file)
db.exec("PRAGMA busy_timeout = 5000")
// A checkpoint that meets the run's own transaction reports busy: try again.
for (let i = 0; i < 100 && db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get().busy !== 0; i++)
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20)
db.close()
const size = fs.statSync(file).size
const junk = Buffer.alloc(size - 4096, 0x5a)
const fd = fs.openSync(file, "r+")
fs.writeSync(fd, junk, 0, junk.length, 4096)
fs.closeSync(fd)
db = new DatabaseSync(file)
db.exec("PRAGMA user_version = 7")
db.close()
`
  )
  return script
}

describe("the state folder and its ledger (end to end)", () => {
  it("a ledger damaged while agents run: they finish and merge, the summary says how to take the work, exit 2 naming the file", async () => {
    const repo = makeRepo()
    const warm = await runCli(["run", plan()], { cwd: repo })
    expect(warm.code, warm.stderr).toBe(0)
    const file = NodePath.join(repo, ".corral", "ledger.db")
    const breaker = ledgerBreaker(file)
    const result = await runCli(
      [
        "run",
        planFile(`agents:
  - id: breaker
    run: ${process.execPath} ${breaker}
  - id: slow
    run: sleep 3; echo slow > slow.txt
  - id: later
    dependsOn: [breaker]
    run: echo later > later.txt
`)
      ],
      { cwd: repo }
    )
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toContain(`cannot read the run ledger ${file}: database disk image is malformed`)
    expect(result.stdout).toMatch(/merged work of 2 agents/)
    expect(result.stdout.match(/the run ledger failed/g), "one warning while the agents run").toHaveLength(1)
    expect(result.stdout).toContain("the run ledger failed, the agents go on unrecorded: ")
    const integration = /git merge (corral\/\S+\/integration)/.exec(result.stdout)?.[1]
    expect(integration, result.stdout).toBeDefined()
    expect(git(repo, "show", `${integration}:slow.txt`).trim()).toBe("slow")
    expect(git(repo, "worktree", "list", "--porcelain").match(/^worktree /gm)).toHaveLength(1)
    expect(NodeFs.readdirSync(NodePath.join(repo, ".corral", "worktrees"))).toEqual([])
    const runs = NodeFs.readdirSync(NodePath.join(repo, ".git", "corral", "runs"))
    expect(
      runs.filter((name) => name.endsWith(".json")),
      "the run's lease is released"
    ).toEqual([])
  }, 60_000)

  it("a damaged ledger.db is exit 2 naming the file and what to do, and is left byte for byte", async () => {
    for (const [kind, bytes] of await damagedLedgers()) {
      const repo = makeRepo()
      const state = NodePath.join(repo, ".corral")
      NodeFs.mkdirSync(state)
      const file = NodePath.join(state, "ledger.db")
      NodeFs.writeFileSync(file, bytes)
      for (const args of [["run", plan()], ["runs"], ["status"]]) {
        const result = await runCli(args, { cwd: repo })
        expect(result.code, `${kind}: corral ${args[0]}: ${result.stderr}`).toBe(2)
        expect(result.stderr).toContain(file)
        expect(result.stderr).toContain("--state-dir")
        expect(result.stderr).not.toMatch(/\n\s+at /)
        expect(NodeFs.readFileSync(file).equals(bytes), `${kind}: ledger.db unchanged by ${args[0]}`).toBe(true)
      }
      expect(branches(repo), `${kind}: no run started`).toEqual(["main"])
    }
  })

  it("a damaged locks.db is exit 2 before anything starts, naming the file and what to do, and is left byte for byte", async () => {
    const random = Buffer.alloc(8192)
    for (let i = 0; i < random.length; i++) random[i] = (i * 7919 + 13) % 251
    const repo = makeRepo()
    const state = NodePath.join(repo, ".corral")
    NodeFs.mkdirSync(state)
    const file = NodePath.join(state, "locks.db")
    NodeFs.writeFileSync(file, random)
    const result = await runCli(["run", plan()], { cwd: repo })
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toContain(`${file}: file is not a database`)
    expect(result.stderr).toContain(`mv ${file} ${file}.damaged`)
    expect(result.stderr).toContain("--state-dir")
    expect(NodeFs.readFileSync(file).equals(random)).toBe(true)
    expect(branches(repo)).toEqual(["main"])
  })

  it("a state folder that already exists (--state-dir) gets no .gitignore; one corral creates does", async () => {
    const repo = makeRepo()
    const existing = NodePath.join(repo, "notes")
    NodeFs.mkdirSync(existing)
    NodeFs.writeFileSync(NodePath.join(existing, "draft.md"), "mine\n")
    const given = await runCli(["run", plan(), "--state-dir", existing], { cwd: repo })
    expect(given.code, given.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(existing, ".gitignore")), "the user's folder untouched").toBe(false)
    const created = NodePath.join(tempDir("state-"), "new")
    const fresh = await runCli(["run", plan(), "--state-dir", created], { cwd: repo })
    expect(fresh.code, fresh.stderr).toBe(0)
    expect(NodeFs.readFileSync(NodePath.join(created, ".gitignore"), "utf8")).toBe("*\n")
  }, 60_000)

  it("a state folder where folders cannot be created is exit 2 at once, naming it", async () => {
    const repo = makeRepo()
    const file = NodePath.join(tempDir("state-"), "a-file")
    NodeFs.writeFileSync(file, "")
    for (const stateDir of ["/proc/self/corral-state", "/proc/self/corral/state", NodePath.join(file, "sub")]) {
      const result = await runCli(["run", plan(), "--state-dir", stateDir], { cwd: repo })
      expect(result.code, `${stateDir}: ${result.stderr}`).toBe(2)
      expect(result.stderr).toContain(`cannot create the state folder ${stateDir}`)
      expect(result.stderr).not.toMatch(/\n\s+at /)
    }
  }, 60_000)
})
