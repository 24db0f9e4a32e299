import { Agent, Corral } from "@corral/core"
import * as Testing from "@corral/core/Testing"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

describe("Corral.run with dependencies", () => {
  it.effect("runs greedily: a fast branch's dependent starts before its slow sibling finishes", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "research", { duration: "1 second", result: "notes" }),
        Testing.scripted(timeline, "outline", { duration: "1 second" }, { dependsOn: ["research"] }),
        Testing.scripted(timeline, "examples", { duration: "5 seconds" }, { dependsOn: ["research"] }),
        Testing.scripted(timeline, "intro", { duration: "1 second" }, { dependsOn: ["outline"] }),
        Testing.scripted(timeline, "draft", { duration: "1 second" }, { dependsOn: ["outline", "examples"] })
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 4 })
      const start = (id: string) => result.get(id)!.startedAt
      assert.strictEqual(start("intro"), 2000)
      assert.strictEqual(start("draft"), 6000)
      assert.strictEqual(result.wallMs, 7000)
    })
  )

  it.effect("passes dependency results downstream", () =>
    Effect.gen(function* () {
      const result = yield* Corral.run([
        Agent.make("a", { run: Effect.succeed(20) }),
        Agent.make("b", { run: Effect.succeed(22) }),
        Agent.make("sum", {
          dependsOn: ["a", "b"],
          run: (deps: { readonly a: number; readonly b: number }) => Effect.succeed(deps.a + deps.b)
        })
      ])
      const sum = result.get("sum")!
      assert.strictEqual(sum._tag === "Succeeded" ? sum.value : undefined, 42)
    })
  )

  it.effect("skips every transitive dependent of a failed agent, naming the failed dependency", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "a", { duration: "1 second", fail: "bad" }),
        Testing.scripted(timeline, "b", { duration: "1 second" }, { dependsOn: ["a"] }),
        Testing.scripted(timeline, "c", { duration: "1 second" }, { dependsOn: ["b"] }),
        Testing.scripted(timeline, "d", { duration: "1 second" })
      ]
      const { result } = yield* Testing.runScripted(agents)
      assert.deepStrictEqual(
        result.outcomes.map((o) =>
          o._tag === "Skipped"
            ? `${o.agentId}:skipped(${o.dependency} ${o.dependencyOutcome})`
            : `${o.agentId}:${o._tag}`
        ),
        ["a:Failed", "b:skipped(a Failed)", "c:skipped(a Failed)", "d:Succeeded"]
      )
      assert.deepStrictEqual(timeline.intervals.map((i) => i.agentId).sort(), ["a", "d"])
    })
  )

  it.effect("starts the agent with the longest remaining path first", () =>
    Effect.gen(function* () {
      const timeline = new Testing.Timeline()
      const agents = [
        Testing.scripted(timeline, "short", { duration: "1 second" }, { estimate: "1 second" }),
        Testing.scripted(timeline, "head", { duration: "1 second" }, { estimate: "1 second" }),
        Testing.scripted(timeline, "tail", { duration: "10 seconds" }, { estimate: "10 seconds", dependsOn: ["head"] })
      ]
      const { result } = yield* Testing.runScripted(agents, { concurrency: 1 })
      assert.deepStrictEqual(
        [...result.outcomes].sort((a, b) => a.startedAt! - b.startedAt!).map((o) => o.agentId),
        ["head", "tail", "short"]
      )
    })
  )
})
