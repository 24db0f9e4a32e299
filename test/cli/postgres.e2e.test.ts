import { execFileSync } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { branches, git, makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"
import { hasPostgres, type Postgres, startPostgres } from "../postgres.ts"

// With CI=true a machine without PostgreSQL 15 runs these tests and fails them; elsewhere they are skipped.
const enabled = hasPostgres() || process.env.CI === "true"

let pg: Postgres
beforeAll(async () => {
  if (enabled) pg = await startPostgres()
}, 120_000)
afterAll(async () => {
  await pg?.stop()
}, 60_000)

const psql = (sql: string) => execFileSync("psql", [pg.url, "-At", "-c", sql], { encoding: "utf8" }).trim()

describe.skipIf(!enabled)("database: per-agent with Postgres (real PostgreSQL 15)", () => {
  it("gives each agent its own schema, isolated from the others, dropped with its workspace", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const agent = (id: string) => `  - id: ${id}
    database: per-agent
    run: |
      psql "$DATABASE_URL" -At -c "create table notes (who text); insert into notes values ('${id}')"
      psql "$DATABASE_URL" -At -c "select string_agg(who, ',') from notes" > ${id}.txt
      psql "$DATABASE_URL" -At -c "show search_path" >> ${id}.txt
      echo "$CORRAL_AGENT_PG_SCHEMA" >> ${id}.txt
`
    const plan = writePlan(tempDir("plan-"), "plan.yaml", `concurrency: 2\nagents:\n${agent("a")}${agent("b")}`)
    const result = await runCli(["run", plan], { cwd: repo, env: { CORRAL_POSTGRES_URL: pg.url } })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    const integration = branches(repo).find((b) => b.endsWith("/integration"))!
    const runId = integration.split("/")[1]!
    for (const id of ["a", "b"]) {
      const [rows, searchPath, schema] = git(repo, "show", `${integration}:${id}.txt`).trim().split("\n")
      expect(rows).toBe(id)
      expect(schema).toBe(`corral_${runId.replace(/-/g, "_")}_${id}`)
      expect(searchPath).toBe(schema)
    }
    expect(psql("select count(*) from pg_namespace where nspname like 'corral_%'")).toBe("0")
  }, 120_000)

  it("keeps the schema of a kept workspace", async () => {
    const repo = makeRepo({ "README.md": "# test\n" })
    const plan = writePlan(
      tempDir("plan-"),
      "plan.yaml",
      `agents:\n  - id: keeper\n    database: per-agent\n    run: psql "$DATABASE_URL" -c "create table t (x int)"\n`
    )
    const result = await runCli(["run", plan, "--keep-workspaces"], {
      cwd: repo,
      env: { CORRAL_POSTGRES_URL: pg.url }
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(psql("select count(*) from pg_tables where schemaname like 'corral_%_keeper'")).toBe("1")
  }, 120_000)
})
