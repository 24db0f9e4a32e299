import { Agent, Corral, Ledger, type Outcome } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"

const counting = (
  ran: Record<string, number>,
  id: string,
  fails: () => boolean,
  value: unknown,
  options: Partial<Agent.Options<unknown, string, never>> = {}
) =>
  Agent.make(id, {
    ...options,
    run: Effect.suspend(() => {
      ran[id] = (ran[id] ?? 0) + 1
      return fails() ? Effect.fail(`${id} failed`) : Effect.succeed(value)
    })
  })

describe("Ledger", () => {
  it.effect("a rerun with the same ledger runs only the agents that did not succeed", () =>
    Effect.gen(function* () {
      const ran: Record<string, number> = {}
      let broken = true
      const plan = [
        counting(ran, "research", () => false, { notes: "n" }),
        counting(ran, "draft", () => broken, "draft", { dependsOn: ["research"] }),
        counting(ran, "review", () => false, "ok", { dependsOn: ["draft"] }),
        counting(ran, "other", () => false, 1)
      ]
      const ledger = Ledger.makeMemory()
      const run = Corral.run(plan).pipe(Effect.provideService(Ledger.Ledger, ledger))
      const first = yield* run
      assert.deepStrictEqual(first.counts, { Succeeded: 2, Failed: 1, Skipped: 1 })
      assert.deepStrictEqual(ran, { research: 1, draft: 1, other: 1 })
      broken = false
      const second = yield* run
      assert.isTrue(second.allSucceeded)
      assert.deepStrictEqual(ran, { research: 1, draft: 2, other: 1, review: 1 })
      assert.deepStrictEqual(
        second.succeeded.map((o) => [o.agentId, o.cached, o.attempts]),
        [
          ["research", true, 0],
          ["draft", false, 1],
          ["review", false, 1],
          ["other", true, 0]
        ]
      )
      assert.deepStrictEqual(second.succeeded[0]!.value, { notes: "n" })
      const third = yield* run
      assert.isTrue(third.succeeded.every((o) => o.cached))
      assert.deepStrictEqual(ran, { research: 1, draft: 2, other: 1, review: 1 })
    })
  )

  it.effect("the default key changes with inputs and with the dependencies' results", () =>
    Effect.sync(() => {
      const agent = (inputs: ReadonlyArray<string>) => Agent.make("a", { run: Effect.void, inputs })
      const key = Ledger.keyOf(agent(["model=x"]), { dep: { b: 1, a: [1, 2] } })
      assert.strictEqual(key, Ledger.keyOf(agent(["model=x"]), { dep: { a: [1, 2], b: 1 } }))
      assert.notStrictEqual(key, Ledger.keyOf(agent(["model=y"]), { dep: { a: [1, 2], b: 1 } }))
      assert.notStrictEqual(key, Ledger.keyOf(agent(["model=x"]), { dep: { a: [1, 3], b: 1 } }))
      assert.match(key!, /^a@[0-9a-f]{16}$/)
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      assert.isUndefined(Ledger.keyOf(agent([]), { dep: cyclic }))
      assert.strictEqual(Ledger.keyOf(Agent.make("b", { run: Effect.void, idempotencyKey: "fixed" }), {}), "fixed")
      assert.strictEqual(
        Ledger.keyOf(
          Agent.make("c", { run: Effect.void, idempotencyKeyOf: (deps) => `c:${Object.keys(deps).length}` }),
          { x: 1 }
        ),
        "c:1"
      )
    })
  )

  it.effect("an agent whose dependency's result changed runs again", () =>
    Effect.gen(function* () {
      const ran: Record<string, number> = {}
      let version = 1
      const plan = () => [
        Agent.make("source", { idempotencyKey: `source-v${version}`, run: Effect.sync(() => version) }),
        counting(ran, "derived", () => false, "d", { dependsOn: ["source"] })
      ]
      const ledger = Ledger.makeMemory()
      yield* Corral.run(plan()).pipe(Effect.provideService(Ledger.Ledger, ledger))
      yield* Corral.run(plan()).pipe(Effect.provideService(Ledger.Ledger, ledger))
      assert.strictEqual(ran.derived, 1)
      version = 2
      yield* Corral.run(plan()).pipe(Effect.provideService(Ledger.Ledger, ledger))
      assert.strictEqual(ran.derived, 2)
    })
  )
})

describe("Ledger.layerMemory", () => {
  it.effect("the documented pattern: provided once around two runs, the second reruns only the failures", () =>
    Effect.gen(function* () {
      const ran: Record<string, number> = {}
      let broken = true
      const agents = [counting(ran, "ok", () => false, 1), counting(ran, "flaky", () => broken, 2)]
      const reruns = Effect.gen(function* () {
        const first = yield* Corral.run(agents)
        broken = false
        const second = yield* Corral.run(agents) // only the agents that did not succeed run again
        return [first, second]
      }).pipe(Effect.provide(Ledger.layerMemory))
      const [first, second] = yield* reruns
      assert.deepStrictEqual(first!.counts, { Succeeded: 1, Failed: 1 })
      assert.isTrue(second!.allSucceeded)
      assert.deepStrictEqual(ran, { ok: 1, flaky: 2 })
      assert.isTrue((second!.get("ok") as Outcome.Succeeded).cached)
    })
  )

  it.effect("provided to two runs separately, it builds two empty ledgers (as the docs warn)", () =>
    Effect.gen(function* () {
      const ran: Record<string, number> = {}
      const agents = [counting(ran, "ok", () => false, 1)]
      yield* Corral.run(agents).pipe(Effect.provide(Ledger.layerMemory))
      yield* Corral.run(agents).pipe(Effect.provide(Ledger.layerMemory))
      assert.deepStrictEqual(ran, { ok: 2 })
    })
  )
})
