import { Agent } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import fc from "fast-check"
import { noPools, validate } from "../../src/internal/validate.ts"

const settings = { concurrency: 4, pools: noPools, claimTimeout: undefined, poolScope: "" }

/** The duplicate-id issues a run names, by the definition: each repeat of an id names its first use. */
const expectedIssues = (ids: ReadonlyArray<string>): ReadonlyArray<string> =>
  ids.flatMap((id, index) => {
    const first = ids.indexOf(id)
    return first < index ? [`${id}|${index}|id|duplicate id: agents[${first}] already uses it`] : []
  })

const issuesOf = (ids: ReadonlyArray<string>, graph: boolean): ReadonlyArray<string> => {
  const agents = ids.map((id, i) =>
    Agent.make(id, { run: Effect.void, dependsOn: graph && i === ids.length - 1 ? [ids[0]!] : undefined })
  )
  const result = validate(agents, settings, true)
  return result._tag === "Success"
    ? []
    : result.failure.issues.map((issue) => `${issue.agentId}|${issue.index}|${issue.field}|${issue.message}`)
}

const numberArb = fc.oneof(
  fc.nat({ max: 40 }).map(String),
  fc.constantFrom("0", "00", "07", "7", "999999999", "1000000000", "4294967296", "", "x", "1x")
)
const idArb = fc
  .tuple(fc.constantFrom("job", "job", "a", "", "j0b", "job1", "JOB", "job "), numberArb)
  .map(([prefix, number]) => prefix + number)
  .filter((id) => id.trim().length > 0)

describe("validate's id check", () => {
  it("finds exactly the duplicate ids, whatever the shape of the ids, above the pairwise size", () => {
    fc.assert(
      fc.property(fc.array(idArb, { minLength: 17, maxLength: 60 }), fc.boolean(), (ids, graph) => {
        const canGraph = graph && ids.length > 1 && ids[0] !== ids[ids.length - 1]
        assert.deepStrictEqual(issuesOf(ids, canGraph), expectedIssues(ids))
      }),
      { numRuns: 500 }
    )
  })

  it("tells ids ending in one number apart by their text", () => {
    const numbered = Array.from({ length: 20 }, (_, i) => `job${i}`)
    assert.deepStrictEqual(issuesOf([...numbered, "job07", "job7x", "job"], false), [])
    assert.deepStrictEqual(issuesOf([...numbered, "job007", "job07"], false), [])
    assert.deepStrictEqual(issuesOf([...numbered, "job99999999", "job099999999"], false), [])
    assert.deepStrictEqual(issuesOf([...numbered, "task7", "7", "x1e3"], false), [])
    assert.deepStrictEqual(issuesOf([...numbered, "job7"], false), [
      "job7|20|id|duplicate id: agents[7] already uses it"
    ])
    assert.deepStrictEqual(issuesOf(["job5", ...numbered], false), [
      "job5|6|id|duplicate id: agents[0] already uses it"
    ])
    assert.deepStrictEqual(issuesOf([...numbered, "job1000", "job1000"], false), [
      "job1000|21|id|duplicate id: agents[20] already uses it"
    ])
  })
})
