import { SqlErrorMessage } from "@corral/platform-node"
import { describe, expect, it } from "vitest"

describe("SqlErrorMessage.withServerAnswer", () => {
  it("follows an error's chain of causes to the server's answer", () => {
    const answer = Object.assign(new Error("PgConnection: Query failed"), {
      reason: { cause: new Error('relation "x" already exists') }
    })
    const migration = new Error('Migration "1_x" failed', { cause: answer })
    expect(SqlErrorMessage.withServerAnswer(migration)).toBe(
      'Migration "1_x" failed: PgConnection: Query failed (relation "x" already exists)'
    )
  })

  it("ends on a chain of causes that comes back to an error it has read", () => {
    const first = new Error("first")
    const second = new Error("second", { cause: first })
    Object.assign(first, { cause: second })
    expect(SqlErrorMessage.withServerAnswer(first)).toBe("first: second")
    const self = new Error("self")
    Object.assign(self, { cause: self })
    expect(SqlErrorMessage.withServerAnswer(self)).toBe("self")
  })
})
