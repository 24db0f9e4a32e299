import { Agent, type Outcome, Plan } from "@corral/core"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import { Effect, Result } from "effect"

const plan = Plan.make()
  .agent("research", { run: Effect.succeed({ notes: "a\nb" }) })
  .agent("count", { run: Effect.succeed(2) })
  .agent("outline", {
    dependsOn: ["research", "count"],
    run: ({ research, count }) => Effect.succeed(research.notes.split("\n").slice(0, count))
  })

describe("Plan", () => {
  it("types each dependency by the agent that produces it", () => {
    Plan.make()
      .agent("research", { run: Effect.succeed({ notes: "" }) })
      .agent("outline", {
        dependsOn: ["research"],
        run: (deps) => {
          expectTypeOf(deps).toEqualTypeOf<{ readonly research: { notes: string } }>()
          return Effect.succeed(deps.research.notes.length)
        }
      })
    expectTypeOf<Plan.Results<typeof plan>>().toEqualTypeOf<
      { readonly research: { notes: string } } & { readonly count: number } & { readonly outline: Array<string> }
    >()
  })

  it("rejects unlisted, unknown and mistyped dependencies and duplicate ids at compile time", () => {
    const base = Plan.make().agent("research", { run: Effect.succeed({ notes: "" }) })
    base.agent("a", {
      run: (deps) =>
        // @ts-expect-error research is not listed in dependsOn
        Effect.succeed(deps.research)
    })
    // @ts-expect-error "nope" is not an agent of the plan
    base.agent("b", { dependsOn: ["nope"], run: Effect.void })
    base.agent("c", {
      dependsOn: ["research"],
      // @ts-expect-error research is an object, not a number
      run: ({ research }: { research: number }) => Effect.succeed(research + 1)
    })
    // @ts-expect-error the id is already in the plan
    base.agent("research", { run: Effect.void })
  })

  it("names a duplicate id in the compile error instead of degrading to never (message: test/examples.test.ts)", () => {
    expectTypeOf<"research" & Plan.DuplicateId<"research">>().not.toBeNever()
  })

  it.effect("looks outcomes up by id with that agent's own type; unknown ids do not compile", () =>
    Effect.gen(function* () {
      const result = yield* Plan.run(plan)
      expectTypeOf(result.get("count")).toEqualTypeOf<Outcome.Outcome<number, never>>()
      expectTypeOf(result.get("outline")).toEqualTypeOf<Outcome.Outcome<Array<string>, never>>()
      // @ts-expect-error "nope" is not an agent of the plan
      result.get("nope")
      const count = result.get("count")
      assert.strictEqual(count._tag === "Succeeded" ? count.value + 1 : 0, 3)
    })
  )

  it.effect("builds a plan in a loop", () =>
    Effect.gen(function* () {
      const files = ["a.ts", "bb.ts"]
      let looped = Plan.make().agent("setup", { run: Effect.succeed(10) })
      for (const f of files) {
        looped = looped.agent(`edit-${f}`, {
          dependsOn: ["setup"],
          run: ({ setup }) => Effect.succeed(setup + f.length)
        })
      }
      let open: Plan.Plan<Record<string, number>> = Plan.make()
      for (const f of files) open = open.agent(`len-${f}`, { run: Effect.succeed(f.length) })
      const result = yield* Plan.run(open)
      const first = result.get("len-a.ts")
      expectTypeOf(first).toEqualTypeOf<Outcome.Outcome<number, never>>()
      assert.deepStrictEqual(
        (yield* Plan.run(looped)).succeeded.map((outcome) => outcome.value),
        [10, 14, 15]
      )
      assert.deepStrictEqual(
        result.succeeded.map((outcome) => outcome.value),
        [4, 5]
      )
    })
  )

  it.effect("runs with the dependencies' results passed downstream", () =>
    Effect.gen(function* () {
      const result = yield* Plan.run(plan)
      assert.isTrue(result.allSucceeded)
      const outline = result.get("outline")!
      assert.deepStrictEqual(outline._tag === "Succeeded" ? outline.value : undefined, ["a", "b"])
      assert.deepStrictEqual(
        plan.agents.map((agent) => [agent.id, agent.dependsOn]),
        [
          ["research", []],
          ["count", []],
          ["outline", ["research", "count"]]
        ]
      )
    })
  )
})

describe("Plan.analyze", () => {
  const agents = [
    Agent.make("research", { run: Effect.void, estimate: "10 seconds", claims: { write: ["notes.md"] } }),
    Agent.make("examples", { run: Effect.void, estimate: "30 seconds", claims: { write: ["src/"] } }),
    Agent.make("outline", {
      run: Effect.void,
      dependsOn: ["research"],
      claims: { read: ["notes.md"], write: ["src/outline.ts"] }
    }),
    Agent.make("intro", { run: Effect.void, dependsOn: ["outline"] }),
    Agent.make("draft", {
      run: Effect.void,
      dependsOn: ["outline", "examples"],
      estimate: "5 seconds",
      claims: { write: ["src/"] }
    }),
    Agent.make("lint", { run: Effect.void, claims: { read: ["src/x.ts"] } })
  ]

  it("gives a topological order, the critical path, the parallelism and the conflicts", () => {
    const analysis = Plan.analyze(agents, { durations: { outline: 5000, intro: 1000, lint: 2000 } })
    assert.isTrue(Result.isSuccess(analysis))
    const { order, criticalPath, maxParallelism, conflicts } = Result.getOrThrow(analysis)
    assert.deepStrictEqual(order, ["research", "examples", "outline", "intro", "draft", "lint"])
    assert.deepStrictEqual(criticalPath, { ids: ["examples", "draft"], totalMs: 35_000 })
    assert.strictEqual(maxParallelism, 3)
    assert.deepStrictEqual(conflicts, [
      { a: "examples", b: "outline", keys: ["src/outline.ts"] },
      { a: "examples", b: "lint", keys: ["src/x.ts"] },
      { a: "draft", b: "lint", keys: ["src/x.ts"] }
    ])
  })

  it("maxParallelism counts the agents running at once when each runs its duration, not every agent that could", () => {
    const fanOut = [
      Agent.make("a", { run: Effect.void }),
      Agent.make("b", { run: Effect.void, dependsOn: ["a"] }),
      Agent.make("c", { run: Effect.void, dependsOn: ["a"] }),
      Agent.make("d", { run: Effect.void })
    ]
    assert.strictEqual(Result.getOrThrow(Plan.analyze(fanOut)).maxParallelism, 2)
    assert.strictEqual(Result.getOrThrow(Plan.analyze(fanOut, { durations: { d: 5 } })).maxParallelism, 3)
  })

  it("reports invalid graphs as InvalidRun", () => {
    const cyclic = [
      Agent.make("a", { run: Effect.void, dependsOn: ["b"] }),
      Agent.make("b", { run: Effect.void, dependsOn: ["a"] })
    ]
    const analysis = Plan.analyze(cyclic)
    assert.isTrue(Result.isFailure(analysis))
  })

  it("reports a list of the wrong shape as InvalidRun instead of throwing", () => {
    for (const [input, expected] of [
      [undefined, "agents: expected an array of agents, got undefined"],
      [[null], "agents[0]: expected an agent built with Agent.make, got null"]
    ] as const) {
      const analysis = Plan.analyze(input as unknown as ReadonlyArray<Agent.Any>)
      assert.isTrue(Result.isFailure(analysis))
      if (Result.isFailure(analysis)) assert.include(analysis.failure.message, expected)
    }
  })

  it("accepts a plan", () => {
    const analysis = Result.getOrThrow(Plan.analyze(plan))
    assert.deepStrictEqual(analysis.criticalPath, { ids: ["research", "outline"], totalMs: 2 })
    assert.strictEqual(analysis.maxParallelism, 2)
  })
})

describe("Pipeable", () => {
  it.effect("agents, plans and run results pipe", () =>
    Effect.gen(function* () {
      const agent = Agent.make("a", { run: Effect.succeed(1) }).pipe((a) => ({ id: a.id }))
      assert.deepStrictEqual(agent, { id: "a" })
      const plan = Plan.make().agent("x", { run: Effect.succeed(2) })
      const result = yield* plan.pipe(Plan.run)
      assert.strictEqual(
        result.pipe((r) => r.get("x")?._tag),
        "Succeeded"
      )
    })
  )
})
