import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { describe, expect, it } from "vitest"
import * as Sandbox from "../../packages/platform-node/src/Sandbox.ts"
import * as PostgresClient from "../../packages/postgres/src/PostgresClient.ts"
import * as TestServer from "../../packages/postgres/src/TestServer.ts"
import { git, jsonEvents, runCli, writePlan } from "../helpers.ts"
import { clusterTests } from "../support/cluster.ts"

// With CI=true a machine without bubblewrap fails the sandbox test instead of skipping it.
const sandboxes = Sandbox.supportUnsafe().available || process.env.CI === "true"
const { available, scratch, scratchRepo, runnerClone, database, startRunner, runners } = await clusterTests()
const found = TestServer.findBinaries()
const psql = found._tag === "Found" ? NodePath.join(found.bin, "psql") : "psql"
const finishedOf = (stdout: string) =>
  Object.fromEntries(
    jsonEvents<{ type: string; agentId?: string; outcome?: Record<string, unknown> }>(stdout)
      .filter((event) => event.type === "Finished")
      .map((event) => [event.agentId!, event.outcome!])
  )

const query = <A extends object>(url: string, run: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, run).pipe(
      Effect.provide(PostgresClient.layer(url, { maxConnections: 1 })),
      Effect.scoped
    )
  )

/** The tables of the database's `public` schema whose rows, as text, contain `text`. */
const tablesContaining = (url: string, text: string) =>
  query(url, (sql) =>
    Effect.gen(function* () {
      const tables = yield* sql<{ table_name: string }>`SELECT table_name FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`
      const hits: Array<string> = []
      for (const { table_name } of tables) {
        const rows = yield* sql.unsafe<{ n: string }>(
          `SELECT count(*) AS n FROM "${table_name}" t WHERE t::text LIKE $1`,
          [`%${text}%`]
        )
        if (Number(rows[0]!.n) > 0) hits.push(table_name)
      }
      return { tables: tables.length, hits }
    })
  )

describe.skipIf(!available)("a runner's agents get the plan's process settings", () => {
  it("limits kill a runner's agent; secrets and passEnv come from the runner's environment and no secret is stored; per-agent databases", async () => {
    const repo = scratch("corral-cluster-iso-")
    const secret = `s3cr3t-${process.pid}-value`
    const url = await database()
    const { address } = await startRunner(url, repo, {
      env: {
        CORRAL_E2E_TOKEN: secret,
        CORRAL_E2E_PASSED: "passed-from-runner",
        CORRAL_E2E_NOT_PASSED: "not-passed",
        CORRAL_POSTGRES_URL: url
      }
    })
    const plan = writePlan(
      repo,
      "plan.yaml",
      `version: 1
isolation: none
agents:
  - id: hog
    limits: { memoryMb: 150 }
    run: node -e 'const a = []; setInterval(() => a.push(Buffer.alloc(4 << 20, 1)), 10)'
  - id: secret
    secrets: [CORRAL_E2E_TOKEN]
    passEnv: [CORRAL_E2E_PASSED]
    run: echo "token=$CORRAL_E2E_TOKEN"; printf '%s|%s|%s' "$CORRAL_E2E_TOKEN" "$CORRAL_E2E_PASSED" "$CORRAL_E2E_NOT_PASSED" > env.txt
  - id: db
    database: per-agent
    run: ${psql} "$DATABASE_URL" -v ON_ERROR_STOP=1 -qc "CREATE TABLE notes (x int)" && echo "$CORRAL_AGENT_PG_SCHEMA" > schema.txt && test -n "$CORRAL_AGENT_DB" && echo "$CORRAL_AGENT_DB" > agent-db.txt
`
    )
    // the coordinator's environment has no secret: the runner's is the only source
    const result = await runCli(["run", plan, "--cluster", url, "--json"], {
      cwd: repo,
      env: { CORRAL_E2E_TOKEN: "", CORRAL_E2E_PASSED: "", CORRAL_POSTGRES_URL: "" }
    })
    expect(result.code, result.stderr).toBe(1)
    const finished = finishedOf(result.stdout)
    expect(finished.hog?.type).toBe("Failed")
    expect(JSON.stringify(finished.hog)).toMatch(/memory limit \(150 MB/)
    expect(finished.secret?.type, JSON.stringify(finished.secret)).toBe("Succeeded")
    expect(finished.db?.type, JSON.stringify(finished.db)).toBe("Succeeded")

    expect(NodeFs.readFileSync(NodePath.join(repo, "env.txt"), "utf8")).toBe(`${secret}|passed-from-runner|`)
    const logs = await runCli(["logs", "secret", "--cluster", url], { cwd: repo })
    expect(logs.code, logs.stderr).toBe(0)
    expect(logs.stdout).toContain("token=***")
    expect(logs.stderr).toContain(`on runner ${address}`)
    const stored = await tablesContaining(url, secret)
    expect(stored.tables).toBeGreaterThan(5)
    expect(stored.hits).toEqual([])
    expect((await tablesContaining(url, "passed-from-runner")).hits).toEqual([])

    const schema = NodeFs.readFileSync(NodePath.join(repo, "schema.txt"), "utf8").trim()
    expect(schema).toMatch(/^corral_.*_db$/)
    const left = await query(
      url,
      (sql) => sql`SELECT schema_name FROM information_schema.schemata WHERE schema_name = ${schema}`
    )
    expect(left).toEqual([])
    const agentDb = NodeFs.readFileSync(NodePath.join(repo, "agent-db.txt"), "utf8").trim()
    expect(agentDb).toMatch(/agent\.db$/)
    expect(NodeFs.existsSync(agentDb)).toBe(false)
  }, 240_000)

  it("coding agents and prompts are exit 2 with --cluster, naming the agents, before anything starts", async () => {
    const repo = scratch("corral-cluster-coding-")
    const plan = writePlan(
      repo,
      "plan.yaml",
      `version: 1
isolation: none
agents:
  - id: claude
    use: claude-code
    prompt: fix it
  - id: plain
    run: echo ok > ran.txt
`
    )
    const result = await runCli(["run", plan, "--cluster", "postgres://postgres@127.0.0.1:1/none"], { cwd: repo })
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toMatch(/agents claude use a coding agent or a prompt, which --cluster does not send/)
    expect(NodeFs.existsSync(NodePath.join(repo, "ran.txt"))).toBe(false)
  }, 60_000)

  it.skipIf(!sandboxes)(
    "a sandboxed runner agent writes its workspace only, and a runner without bubblewrap fails it naming agent and runner",
    async () => {
      const repo = scratch("corral-cluster-sbx-")
      const outside = scratch("corral-cluster-outside-")
      const { url } = await runners(1, repo)
      const plan = writePlan(
        repo,
        "plan.yaml",
        `version: 1
isolation: none
agents:
  - id: boxed
    sandbox: true
    database: per-agent
    run: echo inside > inside.txt; echo escaped > ${outside}/escape.txt; echo db > "$CORRAL_AGENT_DB"; ls ${outside} > listed.txt 2>&1; true
`
      )
      const result = await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
      expect(result.code, result.stderr).toBe(0)
      expect(NodeFs.readFileSync(NodePath.join(repo, "inside.txt"), "utf8")).toBe("inside\n")
      expect(NodeFs.existsSync(NodePath.join(outside, "escape.txt"))).toBe(false)

      const bareRepo = scratch("corral-cluster-nobwrap-")
      const bare = await database()
      const { address } = await startRunner(bare, bareRepo, { env: { CORRAL_BWRAP: "/nonexistent/bwrap" } })
      const refused = await runCli(["run", plan, "--cluster", bare, "--json"], { cwd: repo })
      expect(refused.code, refused.stderr).toBe(1)
      const outcome = JSON.stringify(finishedOf(refused.stdout).boxed)
      expect(outcome).toContain(`agent boxed asks for a sandbox, but runner ${address} cannot provide one`)
      expect(NodeFs.existsSync(NodePath.join(bareRepo, "inside.txt"))).toBe(false)
    },
    240_000
  )

  it.skipIf(!sandboxes)(
    "a sandboxed worktree agent on a runner: its work is merged, the runner's git folder is read-only to it",
    async () => {
      const repo = scratchRepo({ "README.md": "# test\n" })
      const runnerRepo = runnerClone(repo, "sbx")
      const { url } = await runners(1, runnerRepo)
      const plan = writePlan(
        scratch("corral-cluster-sbx-plan-"),
        "plan.yaml",
        `version: 1
agents:
  - id: boxed
    sandbox: true
    run: echo work > work.txt; if echo x > "$(git rev-parse --git-common-dir)/injected" 2>/dev/null; then echo wrote > git-writable.txt; fi; git status --short > status.txt
`
      )
      const result = await runCli(["run", plan, "--cluster", url, "--json"], { cwd: repo })
      expect(result.code, result.stderr).toBe(0)
      const runId = /"runId":"([^"]+)"/.exec(result.stdout)![1]!
      const integration = `corral/${runId}/integration`
      expect(git(repo, "show", `${integration}:work.txt`)).toBe("work\n")
      expect(git(repo, "show", `${integration}:status.txt`)).toContain("work.txt")
      expect(git(repo, "ls-tree", "--name-only", integration).split("\n")).not.toContain("git-writable.txt")
      expect(NodeFs.existsSync(NodePath.join(runnerRepo, ".git", "injected"))).toBe(false)
    },
    240_000
  )
})
