import { describe, expect, it } from "@effect/vitest"
import { LeaseTables } from "../src/index.ts"

describe("LeaseTables", () => {
  it("leaseOfRow decodes a row whose BIGINTs come back as strings (Postgres) or numbers (SQLite)", () => {
    const row = {
      run_id: "r1",
      agent_id: "a",
      keys_json: JSON.stringify([{ key: "src", mode: "write" }]),
      pools_json: JSON.stringify([{ name: "gpu", amount: 1, capacity: 2 }])
    }
    const expected = {
      id: 7,
      holder: { runId: "r1", agentId: "a" },
      fencingToken: 42,
      request: { keys: [{ key: "src", mode: "write" }], pools: [{ name: "gpu", amount: 1, capacity: 2 }] }
    }
    expect(LeaseTables.leaseOfRow({ ...row, id: "7", fencing_token: "42" })).toStrictEqual(expected)
    expect(LeaseTables.leaseOfRow({ ...row, id: 7, fencing_token: 42 })).toStrictEqual(expected)
  })
})
