import { Agent, Corral, type CorralEvent, type Outcome, ToolCalls, Usage } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, type Duration, Effect, Fiber, Logger, Random, References } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import { isLegal, Lifecycle } from "../src/internal/lifecycle.ts"
import { neverReturns } from "./support/subscribers.ts"

interface StopperCase {
  /** What the agent that completes `stopOn` does before it completes it. */
  readonly before: ReadonlyArray<"yield" | "sleep">
  /** The other agents: one that never ends, one that sleeps that many seconds, one that ends at once. */
  readonly siblings: ReadonlyArray<"never" | number | "instant">
  readonly concurrency: number
  readonly subscriber: boolean
}

const stopperCase: fc.Arbitrary<StopperCase> = fc.record({
  before: fc.array(fc.constantFrom("yield" as const, "sleep" as const), { maxLength: 3 }),
  siblings: fc.array(fc.oneof(fc.constantFrom("never" as const, "instant" as const), fc.integer({ min: 1, max: 3 })), {
    maxLength: 3
  }),
  concurrency: fc.integer({ min: 1, max: 4 }),
  subscriber: fc.boolean()
})

const checkStopper = (c: StopperCase) =>
  Effect.gen(function* () {
    const stop = yield* Deferred.make<string>()
    const steps = c.before.map((step) => (step === "yield" ? Effect.yieldNow : Effect.sleep("1 second")))
    const run = Effect.andThen(Effect.all(steps, { discard: true }), Deferred.succeed(stop, "done")).pipe(Effect.as(7))
    const siblings = c.siblings.map((sibling, index) =>
      Agent.make(`sibling-${index}`, {
        run:
          sibling === "never" ? Effect.never : sibling === "instant" ? Effect.void : Effect.sleep(`${sibling} seconds`)
      })
    )
    const agents = [
      Agent.make("stopper", { run }),
      ...siblings,
      Agent.make("after", { dependsOn: ["stopper"], run: Effect.void })
    ]
    const options = { stopOn: Deferred.await(stop), concurrency: c.concurrency }
    const fiber = yield* Effect.forkChild(
      Corral.run(agents, c.subscriber ? { ...options, onEvent: () => Effect.void } : options),
      { startImmediately: true }
    )
    yield* TestClock.adjust("1 minute")
    for (let turn = 0; turn < 100 && fiber.pollUnsafe() === undefined; turn++) yield* Effect.yieldNow
    if (fiber.pollUnsafe() === undefined)
      return assert.fail(`still running after 1 minute and 100 turns: ${JSON.stringify(c)}`)
    const result = yield* Fiber.join(fiber)
    const stopper = result.get("stopper")
    assert.strictEqual(stopper?._tag, "Succeeded", JSON.stringify(c))
    assert.strictEqual((stopper as Outcome.Succeeded).value, 7)
    assert.deepStrictEqual(result.stopped, { _tag: "Stopped", reason: "done" })
    assert.strictEqual(result.get("after")?._tag, "Cancelled")
    c.siblings.forEach((sibling, index) => {
      const tag = result.get(`sibling-${index}`)?._tag
      if (sibling === "never") assert.oneOf(tag, ["Interrupted", "Cancelled"], JSON.stringify(c))
      else assert.oneOf(tag, ["Succeeded", "Interrupted", "Cancelled"], JSON.stringify(c))
    })
  })

class Caller extends Context.Service<Caller, { readonly name: string }>()("test/lifetime/Caller") {}

const tags = (result: { outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>> }) =>
  Object.fromEntries(result.outcomes.map((o) => [o.agentId, o._tag]))

const finishWithin = <A, E>(effect: Effect.Effect<A, E>, within: Duration.Input = "10 minutes") =>
  Effect.gen(function* () {
    const fiber = yield* Effect.forkChild(effect, { startImmediately: true })
    yield* TestClock.adjust(within)
    const exit = fiber.pollUnsafe()
    if (exit === undefined) {
      yield* Fiber.interrupt(fiber)
      return assert.fail(`still running after ${within} of virtual time (deadlock)`)
    }
    return yield* Fiber.join(fiber)
  })

const lines: Array<{ message: unknown; annotations: Record<string, unknown> }> = []
const annotated = Logger.make(({ message, fiber }) =>
  lines.push({
    message: Array.isArray(message) ? message[0] : message,
    annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
  })
)

describe("an agent's context lives as long as the agent", () => {
  it.effect("a fiber the agent forks reads and reports as that agent after it ended", () =>
    Effect.gen(function* () {
      const late = yield* Deferred.make<void>()
      const reported = yield* Deferred.make<void>()
      const seen: Array<unknown> = []
      const first = Agent.make("first", {
        claims: { write: ["a.txt"] },
        run: Effect.forkDetach(
          Effect.gen(function* () {
            yield* Deferred.await(late)
            const me = yield* Agent.current
            const annotations = yield* References.CurrentLogAnnotations
            seen.push({ agentId: me?.agentId, fenced: me?.fencingToken !== undefined, log: { ...annotations } })
            yield* Effect.log("late line")
            yield* Usage.report({ costUsd: 1, inputTokens: 10 })
            yield* Deferred.succeed(reported, undefined)
          })
        ).pipe(Effect.asVoid)
      })
      const second = Agent.make("second", {
        run: Effect.gen(function* () {
          yield* Deferred.succeed(late, undefined)
          yield* Deferred.await(reported)
        })
      })
      const result = yield* Corral.run([first, second], { concurrency: 1, runId: "r" })
      assert.deepStrictEqual(seen, [
        { agentId: "first", fenced: true, log: { "corral.run.id": "r", "corral.agent.id": "first" } }
      ])
      assert.deepStrictEqual(result.get("first")!.usage, { inputTokens: 10, outputTokens: 0, costUsd: 1 })
      assert.deepStrictEqual(result.get("second")!.usage, Usage.zero)
      assert.deepStrictEqual(result.usage, { inputTokens: 10, outputTokens: 0, costUsd: 1 })
      assert.deepStrictEqual(lines, [
        { message: "late line", annotations: { "corral.run.id": "r", "corral.agent.id": "first" } }
      ])
    }).pipe(Effect.provide(Logger.layer([annotated])))
  )

  it.effect("usage a forked fiber reports after its agent ended counts towards the budget, naming that agent", () =>
    Effect.gen(function* () {
      const late = yield* Deferred.make<void>()
      const first = Agent.make("first", {
        run: Effect.forkDetach(Effect.andThen(Deferred.await(late), Usage.report({ costUsd: 5 })))
      })
      const second = Agent.make("second", {
        run: Effect.andThen(Deferred.succeed(late, undefined), Effect.never)
      })
      const result = yield* finishWithin(Corral.run([first, second], { concurrency: 1, budget: { costUsd: 2 } }))
      assert.deepStrictEqual(tags(result), { first: "Succeeded", second: "Interrupted" })
      assert.deepStrictEqual(result.stopped, {
        _tag: "BudgetExceeded",
        agentId: "first",
        limit: "costUsd",
        spent: 5,
        budget: 2
      })
      assert.strictEqual(result.get("first")!.usage.costUsd, 5)
    })
  )

  const logs: Array<string> = []
  const capture = Logger.layer([Logger.make(({ message, logLevel }) => logs.push(`${logLevel}: ${String(message)}`))])

  it.effect("usage reported after the run ended is dropped with a warning naming the agent", () =>
    Effect.gen(function* () {
      const late = yield* Deferred.make<void>()
      const reported = yield* Deferred.make<void>()
      const agent = Agent.make("leaky", {
        run: Effect.forkDetach(
          Effect.andThen(Deferred.await(late), Usage.report({ costUsd: 1 })).pipe(
            Effect.andThen(Deferred.succeed(reported, undefined))
          )
        )
      })
      const result = yield* Corral.run([agent])
      yield* Deferred.succeed(late, undefined)
      yield* Deferred.await(reported)
      assert.strictEqual(result.get("leaky")!.usage.costUsd, 0)
      assert.strictEqual(logs.length, 1)
      assert.include(logs[0]!, "Warn")
      assert.include(logs[0]!, '"leaky"')
    }).pipe(Effect.provide(capture))
  )
})

describe("fibers an agent forks as its children", () => {
  const childOf = (agentId: string, log: Array<string>) =>
    Effect.forkChild(
      Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => log.push(`${agentId}'s child interrupted`)))),
      { startImmediately: true }
    )

  it.effect(
    "are interrupted when the agent ends, before its claims pass to the next agent, whatever worker ran it",
    () =>
      Effect.gen(function* () {
        for (const concurrency of [1, 2]) {
          const log: Array<string> = []
          const agents = [
            Agent.make("first", {
              claims: { write: ["a.txt"] },
              run: Effect.andThen(
                childOf("first", log),
                Effect.sync(() => log.push("first ends"))
              )
            }),
            Agent.make("second", {
              claims: { write: ["a.txt"] },
              run: Effect.sync(() => log.push("second starts"))
            }),
            Agent.make("slow", { run: Effect.sleep("1 second") })
          ]
          const result = yield* finishWithin(Corral.run(agents, { concurrency }))
          assert.isTrue(result.allSucceeded)
          assert.deepStrictEqual(
            log,
            ["first ends", "first's child interrupted", "second starts"],
            `concurrency ${concurrency}`
          )
        }
      })
  )

  it.effect("are interrupted when the agent fails or times out, before the next agent starts", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const result = yield* finishWithin(
        Corral.run(
          [
            Agent.make("times-out", {
              timeout: "1 second",
              run: Effect.andThen(childOf("times-out", log), Effect.never)
            }),
            Agent.make("fails", { run: Effect.andThen(childOf("fails", log), Effect.fail("no")) }),
            Agent.make("after", { dependsOn: ["times-out"], run: Effect.void }),
            Agent.make("last", {
              run: Effect.andThen(
                Effect.sync(() => log.push("last starts")),
                Effect.sleep("1 minute")
              )
            })
          ],
          { concurrency: 1 }
        )
      )
      assert.deepStrictEqual(tags(result), {
        "times-out": "TimedOut",
        fails: "Failed",
        after: "Skipped",
        last: "Succeeded"
      })
      assert.deepStrictEqual(log, ["times-out's child interrupted", "fails's child interrupted", "last starts"])
    })
  )
})

describe("log annotations", () => {
  const logged = (message: string) =>
    lines.filter((line) => line.message === message).map((line) => Object.entries(line.annotations))

  it.effect(
    "name the run and the agent that logs: runs one after another, a nested run, a caller's own annotations",
    () =>
      Effect.gen(function* () {
        lines.length = 0
        const logs = (id: string) => Agent.make(id, { run: Effect.log(id) })
        yield* Corral.run([logs("a")], { runId: "r1" })
        yield* Corral.run([logs("b")], { runId: "r2" })
        const outer = Agent.make("outer", {
          run: Effect.gen(function* () {
            yield* Effect.log("before")
            yield* Corral.run([logs("inner")], { runId: "r4" })
            yield* Effect.log("after")
          })
        })
        yield* Corral.run([outer], { runId: "r3" })
        yield* Corral.run([logs("c")], { runId: "r5" }).pipe(Effect.annotateLogs("caller", "x"))
        yield* Effect.log("caller")
        assert.deepStrictEqual(logged("a"), [
          [
            ["corral.run.id", "r1"],
            ["corral.agent.id", "a"]
          ]
        ])
        assert.deepStrictEqual(logged("b"), [
          [
            ["corral.run.id", "r2"],
            ["corral.agent.id", "b"]
          ]
        ])
        assert.deepStrictEqual(logged("before"), [
          [
            ["corral.run.id", "r3"],
            ["corral.agent.id", "outer"]
          ]
        ])
        assert.deepStrictEqual(logged("inner"), [
          [
            ["corral.run.id", "r4"],
            ["corral.agent.id", "inner"]
          ]
        ])
        assert.deepStrictEqual(logged("after"), [
          [
            ["corral.run.id", "r3"],
            ["corral.agent.id", "outer"]
          ]
        ])
        assert.deepStrictEqual(logged("c"), [
          [
            ["caller", "x"],
            ["corral.run.id", "r5"],
            ["corral.agent.id", "c"]
          ]
        ])
        assert.deepStrictEqual(logged("caller"), [[]])
      }).pipe(Effect.provide(Logger.layer([annotated])))
  )

  it.effect(
    "a generated run id is the same in the agents' logs, in Agent.current, in the result, and its random part is the same for one seed",
    () =>
      Effect.gen(function* () {
        lines.length = 0
        const ids: Array<string> = []
        const agent = (id: string, suspends: boolean) =>
          Agent.make(id, {
            run: Effect.gen(function* () {
              yield* Effect.log(id)
              if (suspends) yield* Effect.sleep("1 second")
              ids.push((yield* Agent.current)!.runId)
              yield* Effect.log(id)
            })
          })
        const run = (suspends: boolean) =>
          finishWithin(Corral.run([agent("a", suspends), agent("b", suspends)], { concurrency: 2 })).pipe(
            Random.withSeed("run id")
          )
        for (const suspends of [true, false]) {
          lines.length = 0
          ids.length = 0
          const result = yield* run(suspends)
          assert.match(result.runId, /^\d{8}T\d{6}-[0-9a-z]{6}$/)
          assert.deepStrictEqual(ids, [result.runId, result.runId])
          for (const line of lines) assert.strictEqual(line.annotations["corral.run.id"], result.runId)
          assert.strictEqual(lines.length, 4)
          assert.strictEqual((yield* run(suspends)).runId.slice(16), result.runId.slice(16))
        }
      }).pipe(Effect.provide(Logger.layer([annotated])))
  )
})

describe("a run nested inside an agent", () => {
  it.effect("inherits the claims the agent holds: tool calls on its own keys run, serialized among themselves", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const call = (name: string) =>
        Effect.gen(function* () {
          log.push(`${name} @${yield* Effect.clockWith((c) => c.currentTimeMillis)}`)
          yield* Effect.sleep("1 second")
          return name
        })
      const editor = Agent.make("editor", {
        claims: { write: ["src/"] },
        run: Effect.asVoid(
          ToolCalls.run([
            { name: "write", write: ["src/x.ts"], run: call("write") },
            { name: "read", read: ["src/x.ts"], run: call("read") },
            { name: "read-other", read: ["src/y.ts"], run: call("read-other") }
          ])
        )
      })
      const other = Agent.make("other", { claims: { write: ["src/x.ts"] }, run: Effect.asVoid(call("other")) })
      const result = yield* finishWithin(Corral.run([editor, other], { concurrency: 2 }))
      assert.deepStrictEqual(tags(result), { editor: "Succeeded", other: "Succeeded" })
      assert.deepStrictEqual([...log].sort(), ["other @2000", "read @1000", "read-other @0", "write @0"])
    })
  )

  it.effect("a user's own nested Corral.run inherits the same way, through runs nested twice", () =>
    Effect.gen(function* () {
      const inner = Agent.make("inner", { claims: { write: ["src/a/b.ts"] }, run: Effect.succeed("deep") })
      const middle = Agent.make("middle", {
        claims: { write: ["src/a/"] },
        run: Effect.map(Corral.run([inner]), (r) => r.get("inner")!._tag)
      })
      const outer = Agent.make("outer", {
        claims: { write: ["src/"] },
        run: Effect.map(Corral.run([middle]), (r) => (r.get("middle") as Outcome.Succeeded).value)
      })
      const result = yield* finishWithin(Corral.run([outer]))
      assert.strictEqual((result.get("outer") as Outcome.Succeeded).value, "Succeeded")
    })
  )

  it.effect(
    "runs nested ten deep: each agent sees the caller's service, itself, its run and its claims; no agent copies the services",
    () =>
      Effect.gen(function* () {
        const seen: Array<{ level: number; agentId: string; runId: string; service: string; base: unknown }> = []
        const record = (level: number) =>
          Effect.gen(function* () {
            const me = (yield* Agent.current)!
            const base = (Fiber.getCurrent()!.context as unknown as { readonly base: unknown }).base
            seen.push({ level, agentId: me.agentId, runId: me.runId, service: (yield* Caller).name, base })
          })
        const levelRun = (level: number): Effect.Effect<string, unknown, Caller> => {
          const path = `src/${"d/".repeat(level)}`
          const leaf = Agent.make(`leaf${level}`, { claims: { write: [`${path}leaf`] }, run: record(level) })
          const enclosing = Agent.make(`enclosing${level}`, {
            claims: { write: [`${path}d/`] },
            run: Effect.andThen(record(level), level === 9 ? Effect.void : levelRun(level + 1))
          })
          return Effect.map(Corral.run([leaf, enclosing], { concurrency: 2 }), (result) =>
            Object.values(tags(result)).join()
          )
        }
        const outcome = yield* finishWithin(Effect.provideService(levelRun(0), Caller, { name: "caller" }))
        assert.strictEqual(outcome, "Succeeded,Succeeded")
        assert.strictEqual(seen.length, 20)
        for (let level = 0; level < 10; level++) {
          const [leaf, enclosing] = [`leaf${level}`, `enclosing${level}`].map(
            (id) => seen.find((s) => s.agentId === id)!
          )
          assert.deepStrictEqual(
            [leaf!.level, enclosing!.level, leaf!.service, enclosing!.service],
            [level, level, "caller", "caller"]
          )
          assert.strictEqual(leaf!.runId, enclosing!.runId)
          assert.isTrue(leaf!.base === enclosing!.base, `the agents of the run at level ${level} copied the services`)
        }
        assert.strictEqual(new Set(seen.map((s) => s.runId)).size, 10)
      })
  )

  it.effect("a nested claim on a key held by another agent still waits for it", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const holder = Agent.make("holder", { claims: { write: ["b.txt"] }, run: Effect.sleep("5 seconds") })
      const editor = Agent.make("editor", {
        claims: { write: ["a.txt"] },
        run: ToolCalls.run([
          {
            name: "touch-b",
            write: ["b.txt"],
            run: Effect.clockWith((c) => c.currentTimeMillis).pipe(Effect.map((t) => log.push(`b @${t}`)))
          }
        ])
      })
      const result = yield* finishWithin(Corral.run([holder, editor], { concurrency: 2 }))
      assert.isTrue(result.allSucceeded)
      assert.deepStrictEqual(log, ["b @5000"])
    })
  )

  it.effect("a nested claim that conflicts with the agent's own claim but is not covered by it fails at once", () =>
    Effect.gen(function* () {
      const editor = Agent.make("editor", {
        claims: { read: ["src/x.ts"] },
        run: ToolCalls.run([{ name: "write", write: ["src/x.ts"], run: Effect.void }])
      })
      const result = yield* finishWithin(Corral.run([editor]))
      const outcome = result.get("editor")!
      assert.strictEqual(outcome._tag, "Failed")
      const message = (outcome as Outcome.Failed).message
      assert.include(message, "0:write")
      assert.include(message, "src/x.ts")
      assert.include(message, '"editor"')
    })
  )

  it.effect("a nested run's concurrency bounds its own agents only: they run within the enclosing agent's slot", () =>
    Effect.gen(function* () {
      let running = 0
      let peak = 0
      const leaf = (id: string) =>
        Agent.make(id, {
          run: Effect.gen(function* () {
            peak = Math.max(peak, ++running)
            yield* Effect.sleep("1 second")
            running--
          })
        })
      const parent = (id: string) =>
        Agent.make(id, { run: Corral.run([leaf(`${id}.1`), leaf(`${id}.2`), leaf(`${id}.3`)], { concurrency: 3 }) })
      const result = yield* finishWithin(Corral.run([parent("p"), parent("q")], { concurrency: 1 }))
      assert.deepStrictEqual(tags(result), { p: "Succeeded", q: "Succeeded" })
      assert.strictEqual(peak, 3)
      assert.strictEqual(result.wallMs, 2000)
    })
  )

  it.effect("usage reported inside a nested run is credited to the nested agent and to the enclosing agent", () =>
    Effect.gen(function* () {
      let inner: ReadonlyArray<Outcome.Outcome<unknown, unknown>> = []
      const outer = Agent.make("outer", {
        run: Effect.map(
          ToolCalls.run([{ name: "llm", run: Usage.report({ costUsd: 0.5 }) }]),
          (outcomes) => (inner = outcomes)
        )
      })
      const result = yield* Corral.run([outer])
      assert.strictEqual(inner[0]!.usage.costUsd, 0.5)
      assert.strictEqual(result.get("outer")!.usage.costUsd, 0.5)
    })
  )
})

describe("stops", () => {
  it.effect("a stop complete before the run starts prevents every agent from starting", () =>
    Effect.gen(function* () {
      let ran = 0
      const agents = [
        Agent.make("instant", { run: Effect.sync(() => ran++) }),
        Agent.make("slow", {
          run: Effect.andThen(
            Effect.sync(() => ran++),
            Effect.sleep("1 hour")
          )
        })
      ]
      const result = yield* Corral.run(agents, { stopOn: Effect.succeed("stopped early") })
      assert.strictEqual(ran, 0)
      assert.deepStrictEqual(tags(result), { instant: "Cancelled", slow: "Cancelled" })
      assert.include((result.get("instant") as Outcome.Cancelled).reason, "stopped early")
      assert.deepStrictEqual(result.stopped, { _tag: "Stopped", reason: "stopped early" })
    })
  )

  it.effect("a stop requested during a run that then finishes at once is still reported", () =>
    Effect.gen(function* () {
      const stop = yield* Deferred.make<string>()
      const agents = [Agent.make("stopper", { run: Deferred.succeed(stop, "from inside") })]
      const result = yield* Corral.run(agents, { stopOn: Deferred.await(stop) })
      assert.deepStrictEqual(result.stopped, { _tag: "Stopped", reason: "from inside" })
    })
  )

  it.effect("an agent that completes stopOn as its last step and returns ends Succeeded; the others stop", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(stopperCase, (c) =>
          Effect.runPromise(checkStopper(c).pipe(Effect.provide([TestClock.layer(), Logger.layer([])])))
        ),
        { numRuns: 200 }
      )
    )
  )

  it.effect("an agent that completes stopOn and then yields is still running: it ends Interrupted", () =>
    Effect.gen(function* () {
      const stop = yield* Deferred.make<string>()
      const agents = [
        Agent.make("stopper", {
          run: Effect.yieldNow.pipe(Effect.andThen(Deferred.succeed(stop, "done")), Effect.andThen(Effect.yieldNow))
        })
      ]
      const result = yield* finishWithin(Corral.run(agents, { stopOn: Deferred.await(stop) }))
      assert.deepStrictEqual(tags(result), { stopper: "Interrupted" })
    })
  )

  it.effect("the agent whose usage crossed the budget says so in its outcome", () =>
    Effect.gen(function* () {
      const agents = [
        Agent.make("spender", {
          run: Effect.sleep("1 second").pipe(Effect.andThen(Usage.report({ costUsd: 3 })), Effect.andThen(Effect.never))
        }),
        Agent.make("sibling", { run: Effect.never })
      ]
      const result = yield* finishWithin(Corral.run(agents, { budget: { costUsd: 2 } }))
      assert.deepStrictEqual(tags(result), { spender: "Interrupted", sibling: "Interrupted" })
      const spender = result.get("spender") as Outcome.Interrupted
      const sibling = result.get("sibling") as Outcome.Interrupted
      assert.isTrue(spender.crossedBudget)
      assert.isFalse(sibling.crossedBudget)
      assert.include(spender.reason, "this agent's usage crossed the costUsd budget of 2")
      assert.include(sibling.reason, 'by agent "spender"')
    })
  )
})

describe("events for a subscriber that falls behind", () => {
  it.effect(
    "at most `eventBuffer` events wait; the rest are counted in one EventsDropped and RunFinished always arrives",
    () =>
      Effect.gen(function* () {
        const n = 200
        const gate = yield* Deferred.make<void>()
        let ran = 0
        const agents = Array.from({ length: n }, (_, i) =>
          Agent.make(`a${i}`, {
            run: Effect.suspend(() => (++ran === n ? Deferred.succeed(gate, undefined) : Effect.void))
          })
        )
        const seen: Array<CorralEvent.CorralEvent> = []
        const result = yield* Corral.run(agents, {
          concurrency: 4,
          eventBuffer: 16,
          onEvent: (event) =>
            Effect.andThen(
              Effect.sync(() => seen.push(event)),
              seen.length === 1 ? Deferred.await(gate) : Effect.void
            )
        })
        assert.isTrue(result.allSucceeded)
        const dropped = seen.filter((e) => e._tag === "EventsDropped")
        assert.strictEqual(dropped.length, 1)
        const emitted = 1 + 3 * n + 1
        const delivered = seen.length - dropped.length
        assert.strictEqual(delivered + (dropped[0] as { count: number }).count, emitted)
        // It handles RunStarted and blocks in the next event until the last agent ran: meanwhile at
        // most 16 events wait, so at most 1 + 1 + 16 events from before the last agent ended arrive.
        assert.isAtMost(seen.filter((e) => e._tag !== "EventsDropped" && e.progress.done < n).length, 1 + 1 + 16)
        assert.strictEqual(seen.at(-1)!._tag, "RunFinished")
        assert.strictEqual(seen.at(-1)!.progress.done, n)
      })
  )

  it.effect("a subscriber that keeps up sees every event, even of agents that never yield", () =>
    Effect.gen(function* () {
      const n = 2000
      const agents = Array.from({ length: n }, (_, i) => Agent.make(`a${i}`, { run: Effect.void }))
      const seen: Array<CorralEvent.CorralEvent> = []
      const result = yield* Corral.run(agents, {
        concurrency: 4,
        eventBuffer: 64,
        onEvent: (event) => Effect.sync(() => seen.push(event))
      })
      assert.isTrue(result.allSucceeded)
      assert.deepStrictEqual(
        seen.filter((e) => e._tag === "EventsDropped"),
        []
      )
      assert.strictEqual(seen.length, 1 + 3 * n + 1)
      assert.strictEqual(seen.filter((e) => e._tag === "Finished").length, n)
      assert.strictEqual(seen.at(-1)!._tag, "RunFinished")
    })
  )

  it.effect("a subscriber that never returns does not hold up the agents; interrupting the run detaches it", () =>
    Effect.gen(function* () {
      const n = 100
      const allRan = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const detached = yield* Deferred.make<void>()
      let ran = 0
      const agents = Array.from({ length: n }, (_, i) =>
        Agent.make(`a${i}`, {
          run: Effect.suspend(() => (++ran === n ? Deferred.succeed(allRan, undefined) : Effect.void))
        })
      )
      const fiber = yield* Effect.forkChild(
        Corral.run(agents, {
          eventBuffer: 8,
          onEvent: neverReturns(entered, detached)
        }),
        { startImmediately: true }
      )
      yield* Deferred.await(entered)
      yield* Deferred.await(allRan)
      assert.strictEqual(ran, n)
      assert.isUndefined(fiber.pollUnsafe())
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(fiber), { startImmediately: true })
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(interrupting)
      yield* Deferred.await(detached)
    })
  )
})

describe("a run started by a fiber that outlived its agent", () => {
  it.effect("inherits nothing from the ended agent: its claims wait for the agents that hold the keys now", () =>
    Effect.gen(function* () {
      const late = yield* Deferred.make<void>()
      const done = yield* Deferred.make<number>()
      const first = Agent.make("first", {
        claims: { write: ["shared.txt"] },
        run: Effect.asVoid(
          Effect.forkDetach(
            Deferred.await(late).pipe(
              Effect.andThen(ToolCalls.run([{ name: "write", write: ["shared.txt"], run: Effect.void }])),
              Effect.andThen(Effect.clockWith((c) => c.currentTimeMillis)),
              Effect.flatMap((t) => Deferred.succeed(done, t))
            )
          )
        )
      })
      const second = Agent.make("second", {
        claims: { write: ["shared.txt"] },
        dependsOn: ["first"],
        run: Effect.andThen(Deferred.succeed(late, undefined), Effect.sleep("5 seconds"))
      })
      const run = yield* Effect.forkChild(Corral.run([first, second]), { startImmediately: true })
      yield* TestClock.adjust("10 seconds")
      assert.isTrue((yield* Fiber.join(run)).allSucceeded)
      assert.strictEqual(yield* Deferred.await(done), 5000)
    })
  )
})

describe("the agent lifecycle", () => {
  it("allows exactly the moves of the documented table and rejects every other", () => {
    const states = ["waiting-deps", "ready", "parked", "running", "done"] as const
    const table = new Set([
      "waiting-deps>ready",
      "waiting-deps>done",
      "ready>running",
      "ready>parked",
      "ready>done",
      "parked>ready",
      "parked>done",
      "running>done"
    ])
    for (const from of states) {
      for (const to of states) assert.strictEqual(isLegal(from, to), table.has(`${from}>${to}`), `${from} -> ${to}`)
    }
    const lifecycle = new Lifecycle(2)
    const a = { id: "a", state: "waiting-deps" as const } as { id: string; state: (typeof states)[number] }
    lifecycle.move(a, "ready")
    lifecycle.move(a, "running")
    assert.throws(() => lifecycle.move(a, "parked"), /illegal lifecycle move of agent "a" from running to parked/)
    lifecycle.finish(a, "Succeeded")
    assert.deepStrictEqual(lifecycle.progress(), {
      total: 2,
      pending: 1,
      waiting: 0,
      running: 0,
      done: 1,
      succeeded: 1,
      failed: 0,
      timedOut: 0,
      interrupted: 0,
      cancelled: 0,
      skipped: 0
    })
  })
})

describe("workers", () => {
  const tracked = (
    workers: Map<string, Fiber.Fiber<unknown, unknown>>,
    id: string,
    ms: number,
    dependsOn = [] as Array<string>
  ) =>
    Agent.make(id, {
      dependsOn,
      run: Effect.suspend(() => {
        workers.set(id, Fiber.getCurrent()!)
        return Effect.sleep(ms)
      })
    })

  it.effect("a worker ends with its agent once no agent is pending, not with the slowest agent", () =>
    Effect.gen(function* () {
      const workers = new Map<string, Fiber.Fiber<unknown, unknown>>()
      const run = yield* Effect.forkChild(
        Corral.run([tracked(workers, "fast", 10), tracked(workers, "slow", 100)], { concurrency: 2 }),
        { startImmediately: true }
      )
      yield* TestClock.adjust(10)
      assert.notStrictEqual(workers.get("fast"), workers.get("slow"))
      assert.isDefined(workers.get("fast")!.pollUnsafe(), "the fast agent's worker still runs")
      assert.isUndefined(workers.get("slow")!.pollUnsafe())
      yield* TestClock.adjust(90)
      const result = yield* Fiber.join(run)
      assert.isTrue(result.allSucceeded)
    })
  )

  it.effect("the first agents that suspend all start before the run's own fiber first suspends", () =>
    Effect.gen(function* () {
      const workers = new Map<string, Fiber.Fiber<unknown, unknown>>()
      const ids = ["a", "b", "c", "d"]
      const run = yield* Effect.forkChild(
        Corral.run(
          ids.map((id) => tracked(workers, id, 10)),
          { concurrency: 3 }
        ),
        { startImmediately: true }
      )
      assert.deepStrictEqual([...workers.keys()], ["a", "b", "c"])
      yield* TestClock.adjust(20)
      const result = yield* Fiber.join(run)
      assert.isTrue(result.allSucceeded)
    })
  )

  it.effect("a worker stays while an agent waits for its dependencies, and runs it", () =>
    Effect.gen(function* () {
      const workers = new Map<string, Fiber.Fiber<unknown, unknown>>()
      const run = yield* Effect.forkChild(
        Corral.run(
          [tracked(workers, "fast", 10), tracked(workers, "slow", 100), tracked(workers, "after", 10, ["slow"])],
          { concurrency: 2 }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust(10)
      assert.isUndefined(workers.get("fast")!.pollUnsafe())
      yield* TestClock.adjust(100)
      const result = yield* Fiber.join(run)
      assert.isTrue(result.allSucceeded)
      assert.strictEqual(result.get("after")!.startedAt, result.get("slow")!.endedAt)
    })
  )

  it.effect("idle workers end once the last pending agent starts, not after the agents still running", () =>
    Effect.gen(function* () {
      const workers = new Map<string, Fiber.Fiber<unknown, unknown>>()
      const run = yield* Effect.forkChild(
        Corral.run(
          [
            tracked(workers, "a", 10),
            tracked(workers, "b", 10),
            tracked(workers, "slow", 30),
            tracked(workers, "after", 50, ["slow"])
          ],
          { concurrency: 3 }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust(30)
      yield* Effect.yieldNow
      const running = workers.get("after")!
      assert.isUndefined(running.pollUnsafe())
      for (const id of ["a", "b", "slow"]) {
        const worker = workers.get(id)!
        if (worker !== running) assert.isDefined(worker.pollUnsafe(), `${id}'s worker is still idle`)
      }
      yield* TestClock.adjust(50)
      const result = yield* Fiber.join(run)
      assert.isTrue(result.allSucceeded)
    })
  )
})

describe("one worker runs agent after agent", () => {
  it.effect("each agent reads its own frame and the next starts only after it ended, whatever kind comes next", () =>
    Effect.gen(function* () {
      const log: Array<string> = []
      const seen = (id: string) =>
        Effect.map(Agent.current, (current) => {
          log.push(`${id}:${current?.agentId}`)
          return current?.agentId
        })
      const yielding = (id: string, extra: object = {}) =>
        Agent.make(id, {
          ...extra,
          run: Effect.andThen(
            Effect.promise(() => Promise.resolve()),
            seen(id)
          )
        })
      const agents = [
        yielding("y1"),
        Agent.make("s1", { run: seen("s1") }),
        yielding("y2"),
        yielding("claims", { claims: { write: ["a.txt"] } }),
        yielding("y3"),
        yielding("limited", { rateLimit: "api" }),
        Agent.make("fails", { run: Effect.andThen(Effect.yieldNow, Effect.fail("boom")) }),
        yielding("y4"),
        Agent.make("s2", { run: Effect.succeed("plain") }),
        yielding("y5")
      ]
      const result = yield* Corral.run(agents, {
        concurrency: 1,
        rateLimits: { api: { limit: 10, interval: "1 second", burst: 10 } }
      })
      assert.deepStrictEqual(log, [
        "y1:y1",
        "s1:s1",
        "y2:y2",
        "claims:claims",
        "y3:y3",
        "limited:limited",
        "y4:y4",
        "y5:y5"
      ])
      assert.deepStrictEqual(
        result.outcomes.map((outcome) => [outcome.agentId, outcome._tag]),
        agents.map((agent) => [agent.id, agent.id === "fails" ? "Failed" : "Succeeded"])
      )
      assert.deepStrictEqual(
        result.succeeded.map((outcome) => outcome.value),
        ["y1", "s1", "y2", "claims", "y3", "limited", "y4", "plain", "y5"]
      )
      assert.isUndefined(yield* Agent.current)
    })
  )

  it.effect("a fail-fast stop ends the chain: the agents after the failure are cancelled", () =>
    Effect.gen(function* () {
      const agents = [
        Agent.make("a", { run: Effect.promise(() => Promise.resolve(1)) }),
        Agent.make("b", {
          run: Effect.andThen(
            Effect.promise(() => Promise.resolve()),
            Effect.fail("boom")
          )
        }),
        Agent.make("c", { run: Effect.promise(() => Promise.resolve(3)) }),
        Agent.make("d", { run: Effect.succeed(4) })
      ]
      const result = yield* Corral.run(agents, { concurrency: 1, mode: "fail-fast" })
      assert.deepStrictEqual(tags(result), { a: "Succeeded", b: "Failed", c: "Cancelled", d: "Cancelled" })
    })
  )
})
