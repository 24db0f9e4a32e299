import { execFileSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { TestServer } from "../../packages/postgres/src/index.ts"
import { sharedServer } from "../../packages/postgres/test/support/server.ts"
import { branches, git, makeRepo, runCli, tempDir, writePlan } from "../helpers.ts"

// Without PostgreSQL these tests are skipped; with CI=true a missing PostgreSQL (or psql) fails them.
const server = await sharedServer()
const found = TestServer.findBinaries()
/** The agents and the checks run `psql`, taken from the server's own bin folder. */
const bin = found._tag === "Found" ? found.bin : ""
const hasPsql = NodeFs.existsSync(NodePath.join(bin, "psql"))
if (server !== undefined && !hasPsql && process.env.CI === "true")
  throw new Error(`psql is required on CI: none in ${bin} (install postgresql-client)`)

let url = ""
beforeAll(async () => {
  if (server !== undefined && hasPsql) url = await Effect.runPromise(server.createDatabase())
}, 120_000)

const env = () => ({ CORRAL_POSTGRES_URL: url, PATH: `${bin}${NodePath.delimiter}${process.env.PATH ?? ""}` })

const psql = (sql: string) =>
  execFileSync(NodePath.join(bin, "psql"), [url, "-At", "-c", sql], { encoding: "utf8" }).trim()

describe.skipIf(server === undefined || !hasPsql)("database: per-agent with Postgres (real PostgreSQL 15)", () => {
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
    const result = await runCli(["run", plan], { cwd: repo, env: env() })
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
      env: env()
    })
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(psql("select count(*) from pg_tables where schemaname like 'corral_%_keeper'")).toBe("1")
  }, 120_000)
})
