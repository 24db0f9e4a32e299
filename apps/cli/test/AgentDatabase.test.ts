import { describe, expect, it } from "vitest"
import * as AgentDatabase from "../src/AgentDatabase.ts"

describe("AgentDatabase", () => {
  it("schema names are lower-case identifiers of at most 63 bytes, distinct per agent", () => {
    expect(AgentDatabase.schemaName("20261126-055046-14wk", "Parser.v2")).toBe("corral_20261126_055046_14wk_parser_v2")
    const long = AgentDatabase.schemaName("20261126-055046-14wk", "a".repeat(80))
    const other = AgentDatabase.schemaName("20261126-055046-14wk", `${"a".repeat(79)}b`)
    expect(long).toMatch(/^[a-z0-9_]{63}$/)
    expect(other).not.toBe(long)
  })

  it("sets search_path through a percent-encoded options parameter, keeping other parameters", () => {
    const env = AgentDatabase.agentEnv("postgres://u:p@127.0.0.1:5432/db?sslmode=disable", "corral_r_a")
    expect(env.DATABASE_URL).toBe(
      "postgres://u:p@127.0.0.1:5432/db?sslmode=disable&options=-c%20search_path%3Dcorral_r_a"
    )
    expect(env.PGOPTIONS).toBe("-c search_path=corral_r_a")
    expect(env.CORRAL_AGENT_PG_SCHEMA).toBe("corral_r_a")
  })
})
