import * as NodeFs from "node:fs"
import * as net from "node:net"
import * as NodePath from "node:path"
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest"
import * as Sandbox from "../../packages/platform-node/src/Sandbox.ts"
import { branches, git, makeRepo, runCli, startCli, tempDir, waitFor, worktrees, writePlan } from "../helpers.ts"

// With CI=true a machine without bubblewrap runs these tests and fails them; elsewhere they are skipped.
const enabled = Sandbox.supportUnsafe().available || process.env.CI === "true"

let server: net.Server
let port = 0
let connections = 0

beforeAll(async () => {
  server = net.createServer((socket) => {
    connections++
    socket.end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  port = (server.address() as net.AddressInfo).port
})
afterAll(() => new Promise((resolve) => server.close(resolve)))

/** Live (not zombie) processes of a process group, from /proc. */
const groupMembers = (pgid: number): number =>
  NodeFs.readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const stat = NodeFs.readFileSync(`/proc/${entry}/stat`, "latin1")
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        return Number(fields[2]) === pgid && fields[0] !== "Z"
      } catch {
        return false
      }
    }).length

const attempt = (name: string, command: string) =>
  `      if ( ${command} ) >/dev/null 2>&1; then echo "${name}:ok"; else echo "${name}:blocked"; fi >> results.tmp`

const indent = (lines: ReadonlyArray<string>) => lines.map((line) => `      ${line}`).join("\n")

const escapePlan = (repo: string) => `version: 1
concurrency: 2
agents:
  - id: victim
    timeout: 2m
    run: |
${indent([
  "echo victim-secret > secret.txt",
  'until [ -d "$TMPDIR/../../attacker/tmp" ]; do sleep 0.05; done',
  'touch "$TMPDIR/../../attacker/tmp/go"',
  // until the attacker is done: its results in its worktree, or merged (its worktree may be gone by then)
  'until [ -e "$CORRAL_WORKSPACE/../attacker/results.txt" ] || git show "corral/$CORRAL_RUN_ID/integration:results.txt" >/dev/null 2>&1; do sleep 0.05; done'
])}
  - id: attacker
    timeout: 2m
    sandbox: { network: false }
    env: { REPO: "${repo}", TEST_PORT: "${port}" }
    run: |
${indent(['until [ -e "$TMPDIR/go" ]; do sleep 0.05; done'])}
${[
  attempt("read-victim", 'cat "$CORRAL_WORKSPACE/../victim/secret.txt"'),
  attempt("read-untracked", 'cat "$REPO/untracked-secret.txt"'),
  attempt("read-home", 'cat "$HOME/.ssh/id_rsa"'),
  attempt("read-state", 'cat "$REPO/.corral/ledger.db"'),
  attempt("write-checkout", 'echo x > "$REPO/pwned.txt"'),
  attempt("write-victim", 'echo x > "$CORRAL_WORKSPACE/../victim/pwned.txt"'),
  attempt("move-branch", 'git update-ref "refs/heads/corral/$CORRAL_RUN_ID/victim" HEAD'),
  attempt("move-main", "git update-ref refs/heads/main HEAD"),
  attempt("tcp", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/$TEST_PORT'`),
  attempt("git-log", "git log -1 --format=%s"),
  attempt("write-tmpdir", 'echo x > "$TMPDIR/scratch"')
].join("\n")}
${indent(["echo edit > own.txt", "mv results.tmp results.txt"])}
`

describe.skipIf(!enabled)("corral run with sandboxed agents (bubblewrap, real git)", () => {
  it("every escape fails while the sandboxed agent's own edit is committed and merged", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    NodeFs.writeFileSync(NodePath.join(repo, "untracked-secret.txt"), "checkout-secret")
    const home = tempDir("corral-home-")
    NodeFs.mkdirSync(NodePath.join(home, ".ssh"))
    NodeFs.writeFileSync(NodePath.join(home, ".ssh", "id_rsa"), "home-secret")
    const mainBefore = git(repo, "rev-parse", "main").trim()
    const before = connections
    const plan = writePlan(tempDir("plan-"), "plan.yaml", escapePlan(repo))
    const result = await runCli(["run", plan], { cwd: repo, env: { HOME: home } })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    const verdicts = Object.fromEntries(
      git(repo, "show", `${integration}:results.txt`)
        .trim()
        .split("\n")
        .map((line) => line.split(":") as [string, string])
    )
    expect(verdicts).toEqual({
      "read-victim": "blocked",
      "read-untracked": "blocked",
      "read-home": "blocked",
      "read-state": "blocked",
      "write-checkout": "blocked",
      "write-victim": "blocked",
      "move-branch": "blocked",
      "move-main": "blocked",
      tcp: "blocked",
      "git-log": "ok",
      "write-tmpdir": "ok"
    })
    expect(git(repo, "show", `${integration}:own.txt`)).toBe("edit\n")
    expect(git(repo, "show", `${integration}:secret.txt`)).toBe("victim-secret\n")
    expect(connections).toBe(before)
    expect(NodeFs.existsSync(NodePath.join(repo, "pwned.txt"))).toBe(false)
    expect(git(repo, "rev-parse", "main").trim()).toBe(mainBefore)
    expect(worktrees(repo)).toEqual([NodeFs.realpathSync(repo)])
  }, 120_000)

  it("per-agent databases: each agent has its own SQLite file and cannot see another's", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const script = [
      "const { DatabaseSync } = require('node:sqlite')",
      "const db = new DatabaseSync(process.env.CORRAL_AGENT_DB)",
      "db.exec('create table if not exists seen (agent text)')",
      "db.prepare('insert into seen values (?)').run(process.env.CORRAL_AGENT_ID)",
      "const rows = db.prepare('select agent from seen').all().map((r) => r.agent)",
      "require('node:fs').writeFileSync(process.env.CORRAL_AGENT_ID + '.txt', rows.join(',') + '\\n' + process.env.DATABASE_URL + '\\n')"
    ].join("; ")
    const agent = (id: string, other: string) => `  - id: ${id}
    database: per-agent
    sandbox: { allow: { read: ["${process.execPath}"] } }
    env: { NODE_BIN: "${process.execPath}" }
    run: |
      "$NODE_BIN" -e "${script}"
      if cat "$CORRAL_AGENT_DIR/../../${other}/data/agent.db" >/dev/null 2>&1; then echo read >> ${id}.txt; fi
`
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `version: 1\nconcurrency: 2\nagents:\n${agent("a", "b")}${agent("b", "a")}`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    for (const id of ["a", "b"]) {
      const [rows, url, ...rest] = git(repo, "show", `${integration}:${id}.txt`).trim().split("\n")
      expect(rows).toBe(id)
      expect(url).toMatch(new RegExp(`^file:/.*/agents/[^/]+/${id}/data/agent\\.db$`))
      expect(rest).toEqual([])
    }
  }, 120_000)

  it("network: loopback reaches only the allowed ports of the host's 127.0.0.1", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const closed = net.createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const closedPort = (closed.address() as net.AddressInfo).port
    const before = connections
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: client
    sandbox: { network: loopback, allow: { ports: [${port}] } }
    run: |
${attempt("allowed", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'`)}
${attempt("other", `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${closedPort}'`)}
      mv results.tmp results.txt
`
    )
    const result = await runCli(["run", plan], { cwd: repo }).finally(() => closed.close())
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${integration}:results.txt`)).toBe("allowed:ok\nother:blocked\n")
    expect(connections).toBe(before + 1)
  }, 120_000)

  it("a sandboxed agent that relinks its worktree's .git cannot make corral run its commands", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const marker = NodePath.join(tempDir("marker-"), "escaped")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: relinker
    sandbox: true
    run: |
      git init -q evil
      git -C evil config core.fsmonitor "touch ${marker}; false"
      git -C evil config core.hooksPath "$PWD/hooks"
      echo edit > own.txt
      printf 'gitdir: %s/evil/.git\\n' "$PWD" > .git
`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(1)
    expect(result.stdout).toContain("the sandboxed agent changed")
    expect(NodeFs.existsSync(marker)).toBe(false)
    expect(git(repo, "rev-parse", "main").trim()).toBe(git(repo, "rev-parse", "HEAD").trim())
  }, 120_000)

  it("isolation none: the checkout is writable, but .corral/ is hidden and .git read-only", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const mainBefore = git(repo, "rev-parse", "main").trim()
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `isolation: none
agents:
  - id: inplace
    sandbox: true
    run: |
${attempt("read-state", 'cat "$PWD/.corral/ledger.db"')}
${attempt("list-state", 'ls -A "$PWD/.corral" | grep -qx -e ledger.db -e runs -e worktrees')}
${attempt("write-state", 'echo x > "$PWD/.corral/pwned"')}
${attempt("move-main", "git update-ref refs/heads/main HEAD~0^{tree}")}
${attempt("delete-branch", "git branch -D main")}
${attempt("write-tmpdir", 'echo x > "$TMPDIR/scratch"')}
      mv results.tmp results.txt
`
    )
    const result = await runCli(["run", plan], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(NodeFs.readFileSync(NodePath.join(repo, "results.txt"), "utf8")).toBe(
      [
        "read-state:blocked",
        "list-state:blocked",
        "write-state:blocked",
        "move-main:blocked",
        "delete-branch:blocked",
        "write-tmpdir:ok",
        ""
      ].join("\n")
    )
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "pwned"))).toBe(false)
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "ledger.db"))).toBe(true)
    expect(git(repo, "rev-parse", "main").trim()).toBe(mainBefore)
  }, 120_000)

  it("isolation none with --repo a subfolder: the top's .corral/ stays hidden under an allow path that holds it", async () => {
    const repo = makeRepo({ "README.md": "# test\n", "sub/keep.txt": "sub\n" })
    const sub = NodePath.join(repo, "sub")
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `isolation: none
agents:
  - id: inplace
    sandbox: { allow: { read: [".."] } }
    run: |
${attempt("read-top", 'grep -q test "$PWD/../README.md"')}
${attempt("read-state", 'cat "$PWD/../.corral/ledger.db"')}
${attempt("list-state", 'ls -A "$PWD/../.corral" | grep -qx -e ledger.db -e runs -e locks.db')}
${attempt("write-state", 'echo x > "$PWD/../.corral/pwned"')}
${attempt("write-tmpdir", 'echo x > "$TMPDIR/scratch"')}
      mv results.tmp results.txt
`
    )
    const result = await runCli(["run", plan, "--repo", sub], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(sub, ".corral")), "the state folder is the top's").toBe(false)
    expect(NodeFs.readFileSync(NodePath.join(sub, "results.txt"), "utf8")).toBe(
      ["read-top:ok", "read-state:blocked", "list-state:blocked", "write-state:blocked", "write-tmpdir:ok", ""].join(
        "\n"
      )
    )
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral", "ledger.db"))).toBe(true)
    const top = NodeFs.realpathSync(repo)
    const inWorktree = writePlan(
      tempDir("plan-"),
      "worktree.yaml",
      `agents:
  - id: wt
    sandbox: { allow: { read: [".."] } }
    run: |
${attempt("read-state", `cat "${top}/.corral/ledger.db"`)}
${attempt("read-top", `grep -q test "${top}/README.md"`)}
      mv results.tmp results.txt
`
    )
    const worktreeRun = await runCli(["run", inWorktree, "--repo", sub], { cwd: repo })
    expect(worktreeRun.code, worktreeRun.stdout + worktreeRun.stderr).toBe(0)
    const merged = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${merged}:results.txt`)).toBe("read-state:blocked\nread-top:ok\n")
  }, 120_000)

  it("allow.read of / shows the file system read-only, with the sandbox's own /dev, /proc and /tmp (the checkout here is in /tmp) and the state folder hidden", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const top = NodeFs.realpathSync(repo)
    const beside = NodePath.join(NodePath.dirname(top), `beside-${NodePath.basename(top)}.txt`)
    NodeFs.writeFileSync(beside, "host tmp\n")
    // Outside /tmp, which the sandbox replaces, so only the state folder's own hiding keeps it out of sight.
    const state = NodeFs.mkdtempSync("/var/tmp/corral-e2e-state-")
    // A file outside /tmp (this checkout may be under /tmp, which the sandbox replaces).
    const outside = NodeFs.mkdtempSync("/var/tmp/corral-e2e-outside-")
    NodeFs.writeFileSync(NodePath.join(outside, "package.json"), '{ "name": "outside" }\n')
    onTestFinished(() => {
      NodeFs.rmSync(beside, { force: true })
      NodeFs.rmSync(state, { recursive: true, force: true })
      NodeFs.rmSync(outside, { recursive: true, force: true })
    })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:
  - id: root
    sandbox: { network: false, allow: { read: ["/"] } }
    run: |
${attempt("read-etc", "grep -q root /etc/passwd")}
${attempt("read-outside", `grep -q '"name"' "${outside}/package.json"`)}
${attempt("read-top", `grep -q test "${top}/README.md"`)}
${attempt("dev-null", "echo x > /dev/null")}
${attempt("own-proc", "[ \"$(ls /proc | grep -c '^[0-9]')\" -lt 10 ]")}
${attempt("read-host-tmp", `cat "${beside}"`)}
${attempt("write-tmp", "echo x > /tmp/pwned")}
${attempt("read-state", `cat "${state}/ledger.db"`)}
${attempt("list-state", `ls -A "${state}" | grep -qx -e ledger.db -e runs -e locks.db`)}
${attempt("write-checkout", `echo x > "${top}/pwned.txt"`)}
${attempt("write-tmpdir", 'echo x > "$TMPDIR/scratch"')}
      mv results.tmp results.txt
`
    )
    const result = await runCli(["run", plan, "--state-dir", state], { cwd: repo })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(NodeFs.existsSync(NodePath.join(state, "ledger.db"))).toBe(true)
    const merged = branches(repo).find((b) => b.endsWith("/integration"))!
    expect(git(repo, "show", `${merged}:results.txt`)).toBe(
      [
        "read-etc:ok",
        "read-outside:ok",
        "read-top:blocked",
        "dev-null:ok",
        "own-proc:ok",
        "read-host-tmp:blocked",
        "write-tmp:blocked",
        "read-state:blocked",
        "list-state:blocked",
        "write-checkout:blocked",
        "write-tmpdir:ok",
        ""
      ].join("\n")
    )
    expect(NodeFs.existsSync(NodePath.join(top, "pwned.txt"))).toBe(false)
  }, 120_000)

  it("kill -9 of corral ends its sandboxed agents at once (bwrap --die-with-parent)", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "agents:\n  - id: long\n    sandbox: true\n    run: sleep 300 & echo agent-is-ready; wait\n"
    )
    const cli = startCli(["run", plan, "--json"], { cwd: repo })
    const runs = NodePath.join(repo, ".corral", "runs")
    const pidFile = () =>
      NodeFs.existsSync(runs)
        ? NodeFs.readdirSync(runs)
            .map((run) => NodePath.join(runs, run, "pids", "long"))
            .find((file) => NodeFs.existsSync(file))
        : undefined
    await waitFor(
      () => pidFile() !== undefined && cli.output().includes("agent-is-ready"),
      30_000,
      "the agent to start"
    )
    const leader = Number(NodeFs.readFileSync(pidFile()!, "utf8"))
    const members = () => groupMembers(leader)
    expect(members()).toBeGreaterThanOrEqual(3)
    cli.signal("SIGKILL")
    await cli.done
    await waitFor(() => members() === 0, 20_000, "the sandboxed processes to end")
  }, 120_000)

  it("corral validate reports the machine's sandbox support", async () => {
    const plan = writePlan(tempDir("plan-"), "plan.yaml", "agents:\n  - id: a\n    run: 'true'\n    sandbox: true\n")
    const result = await runCli(["validate", plan], { cwd: tempDir("cwd-") })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/sandbox: available \(bubblewrap/)
  })
})

describe("sandboxed plans on a machine without bubblewrap", () => {
  const env = { CORRAL_BWRAP: "/nonexistent/bwrap" }
  const plan = () =>
    writePlan(
      tempDir("plan-"),
      "plan.yaml",
      "defaults:\n  sandbox: { network: false }\nagents:\n  - id: a\n    run: touch ran.txt\n  - id: b\n    run: 'true'\n"
    )

  it("corral validate exits 2 with an install hint", async () => {
    const result = await runCli(["validate", plan()], { cwd: tempDir("cwd-"), env })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("agents a, b ask for a sandbox")
    expect(result.stderr).toContain("apt-get install bubblewrap")
    expect(result.stderr).toContain("sandbox: not available")
  })

  it("corral run exits 2 before anything starts (no silent downgrade)", async () => {
    const repo = makeRepo()
    const result = await runCli(["run", plan()], { cwd: repo, env })
    expect(result.code).toBe(2)
    expect(result.stderr).toContain("apt-get install bubblewrap")
    expect(NodeFs.existsSync(NodePath.join(repo, ".corral"))).toBe(false)
    expect(branches(repo)).toEqual(["main"])
  })
})
