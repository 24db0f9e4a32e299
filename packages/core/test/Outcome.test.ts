import { Outcome } from "@corral/core"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { Schema } from "effect"

const common = {
  agentId: "a",
  attempts: 2,
  queuedAt: 1,
  startedAt: 2,
  endedAt: 3,
  waitedMs: 1,
  usage: { inputTokens: 4, outputTokens: 5, costUsd: 0.25 }
}

const examples: { readonly [Tag in Outcome.Tag]: Extract<Outcome.Outcome, { _tag: Tag }> } = {
  Succeeded: new Outcome.Succeeded({ ...common, value: { n: 1 }, cached: true }),
  Failed: new Outcome.Failed({ ...common, error: { code: 7 }, defect: false, message: "no" }),
  TimedOut: new Outcome.TimedOut({ ...common, afterMs: 10 }),
  Interrupted: new Outcome.Interrupted({ ...common, reason: "stop", crossedBudget: true }),
  Cancelled: new Outcome.Cancelled({ ...common, startedAt: null, reason: "stop" }),
  Skipped: new Outcome.Skipped({ ...common, dependency: "b", dependencyOutcome: "Failed" }),
  ClaimTimedOut: new Outcome.ClaimTimedOut({ ...common, afterMs: 5, blockers: [{ key: "k", holder: "h" }] })
}

describe("Outcome", () => {
  it("the classes and Encoded describe the same tags and fields", () => {
    expectTypeOf<Outcome.Encoded["_tag"]>().toEqualTypeOf<Outcome.Tag>()
    const encodedTags = Outcome.Encoded.members.map((member) => member.fields._tag.schema.literal)
    assert.deepStrictEqual([...encodedTags].sort(), Object.keys(examples).sort())
    for (const member of Outcome.Encoded.members) {
      const tag = member.fields._tag.schema.literal as Outcome.Tag
      assert.deepStrictEqual(Object.keys(member.fields).sort(), Object.keys({ ...examples[tag] }).sort(), tag)
    }
  })

  it("every outcome round-trips through Encoded and fromEncoded with every field", () => {
    for (const outcome of Object.values(examples)) {
      const encoded = Schema.encodeUnknownSync(Outcome.Encoded)(outcome)
      const decoded = Schema.decodeUnknownSync(Outcome.Encoded)(JSON.parse(JSON.stringify(encoded)))
      const back = Outcome.fromEncoded(decoded)
      assert.strictEqual(back.constructor, outcome.constructor)
      assert.deepStrictEqual({ ...back }, { ...outcome })
    }
  })

  it("withUsage keeps the class and every other field", () => {
    for (const outcome of Object.values(examples)) {
      const usage = { inputTokens: 1, outputTokens: 1, costUsd: 1 }
      const changed = Outcome.withUsage(outcome, usage)
      assert.strictEqual(changed.constructor, outcome.constructor)
      assert.deepStrictEqual({ ...changed }, { ...outcome, usage })
    }
  })
})
