import { Agent, AgentKind, Corral, Executor } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"

class TooLong extends Schema.TaggedError<TooLong>()("TooLong", { length: Schema.Number, message: Schema.String }) {}

class Prefix extends Context.Service<Prefix, string>()("test/Prefix") {}

const Measure = AgentKind.make("measure", {
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ length: Schema.NumberFromString, by: Schema.String }),
  error: TooLong,
  handler: ({ text }) =>
    Effect.gen(function* () {
      const prefix = yield* Prefix
      const me = yield* Agent.current
      if (text.length > 5) return yield* new TooLong({ length: text.length, message: `${text} is too long` })
      if (text === "boom") return yield* Effect.die(new Error("boom"))
      return { length: text.length, by: `${prefix}${me?.runId}/${me?.agentId}#${me?.attempt}` }
    })
})

const kindsLayer = (kinds: ReadonlyArray<AgentKind.Any>) =>
  Executor.layerLocal(kinds).pipe(Layer.provide(Layer.succeed(Prefix, "local:")))

/** An executor that crosses a JSON boundary, as a remote one does, and records what it was asked. */
const jsonExecutor = (requests: Array<Executor.Request>) =>
  Layer.effect(
    Executor.Executor,
    Effect.map(Effect.service(Executor.Kinds), (kinds) =>
      Executor.Executor.of({
        execute: (request) => {
          const wire: Executor.Request = JSON.parse(JSON.stringify(request))
          requests.push(wire)
          return Effect.map(kinds.run(wire), (result) => JSON.parse(JSON.stringify(result)) as Executor.Result)
        }
      })
    )
  ).pipe(Layer.provide(Executor.layerKinds([Measure])), Layer.provide(Layer.succeed(Prefix, "remote:")))

describe("AgentKind", () => {
  it.effect("runs registered kinds through the executor in context, decoding outputs and typed failures", () =>
    Effect.gen(function* () {
      const result = yield* Corral.run(
        [
          AgentKind.agent(Measure, "short", { text: "abc" }),
          AgentKind.agent(Measure, "long", { text: "abcdefgh" }),
          AgentKind.agent(Measure, "after", { text: "xy" }, { dependsOn: ["short"] })
        ],
        { runId: "r1" }
      ).pipe(Effect.provide(kindsLayer([Measure])))
      const short = result.get("short")!
      assert.strictEqual(short._tag, "Succeeded")
      if (short._tag === "Succeeded") assert.deepStrictEqual(short.value, { length: 3, by: "local:r1/short#1" })
      const long = result.get("long")!
      assert.strictEqual(long._tag, "Failed")
      if (long._tag === "Failed") {
        assert.instanceOf(long.error, TooLong)
        assert.strictEqual((long.error as TooLong).length, 8)
        assert.isFalse(long.defect)
      }
      assert.strictEqual(result.get("after")!._tag, "Succeeded")
    })
  )

  it.effect("the same agents give the same outcomes on an executor that crosses a JSON boundary", () =>
    Effect.gen(function* () {
      const requests: Array<Executor.Request> = []
      const result = yield* Corral.run([AgentKind.agent(Measure, "short", { text: "abc" })], { runId: "r2" }).pipe(
        Effect.provide(jsonExecutor(requests))
      )
      const short = result.get("short")!
      assert.strictEqual(short._tag, "Succeeded")
      if (short._tag === "Succeeded") assert.deepStrictEqual(short.value, { length: 3, by: "remote:r2/short#1" })
      assert.deepStrictEqual(requests, [
        { kind: "measure", input: { text: "abc" }, runId: "r2", agentId: "short", attempt: 1 } as Executor.Request
      ])
    })
  )

  it.effect(
    "a kind unknown to the executor, a defect and a bad input end as ExecutionError failures naming the kind and agent",
    () =>
      Effect.gen(function* () {
        const result = yield* Corral.run([AgentKind.agent(Measure, "unknown", { text: "a" })], { runId: "r3" }).pipe(
          Effect.provide(kindsLayer([]))
        )
        const unknown = result.get("unknown")!
        assert.strictEqual(unknown._tag, "Failed")
        if (unknown._tag === "Failed") {
          const error = unknown.error as Executor.ExecutionError
          assert.deepStrictEqual(
            [error._tag, error.reason, error.kind, error.agentId],
            ["ExecutionError", "UnknownKind", "measure", "unknown"]
          )
          assert.match(error.message, /no kind "measure" is registered here/)
        }
        const died = yield* Corral.run([AgentKind.agent(Measure, "died", { text: "boom" })]).pipe(
          Effect.provide(kindsLayer([Measure]))
        )
        const error = (died.get("died") as { error: Executor.ExecutionError }).error
        assert.deepStrictEqual([error.reason, error.agentId], ["Defect", "died"])
        assert.match(error.message, /boom/)
        const bad = yield* Effect.flip(
          Executor.runRegistered({
            kind: "measure",
            input: { text: 1 },
            runId: "r",
            agentId: "a",
            attempt: 1,
            fencingToken: undefined
          })
        ).pipe(Effect.provide(Executor.layerKinds([Measure])), Effect.provide(Layer.succeed(Prefix, "")))
        assert.strictEqual(bad.reason, "BadInput")
      })
  )

  it.effect("an ExecutionError's message names the kind, the agent and what did not match", () =>
    Effect.gen(function* () {
      const Sloppy = AgentKind.make("sloppy", {
        input: Schema.Struct({ text: Schema.String }),
        output: Schema.Struct({ words: Schema.Number }),
        handler: ({ text }) =>
          text === "die" ? Effect.die(new Error("handler broke")) : Effect.succeed({ words: text as unknown as number })
      })
      const result = yield* Corral.run([
        AgentKind.agent(Sloppy, "many", { text: "many" }),
        AgentKind.agent(Sloppy, "d", { text: "die" })
      ]).pipe(Effect.provide(Executor.layerLocal([Sloppy])))
      const output = (result.get("many") as { error: Executor.ExecutionError }).error
      assert.strictEqual(output.reason, "BadOutput")
      assert.strictEqual(
        output.message,
        'kind "sloppy", agent "many": the handler\'s value does not match the output schema: Expected number\n  at ["words"]'
      )
      const died = (result.get("d") as { error: Executor.ExecutionError }).error
      assert.strictEqual(died.reason, "Defect")
      assert.match(died.message, /^kind "sloppy", agent "d": the handler died: Error: handler broke/)
      const input = yield* Effect.flip(
        Executor.runRegistered({
          kind: "sloppy",
          input: { text: 1 },
          runId: "r",
          agentId: "a",
          attempt: 1,
          fencingToken: undefined
        })
      ).pipe(Effect.provide(Executor.layerKinds([Sloppy])))
      assert.strictEqual(
        input.message,
        'kind "sloppy", agent "a": the input does not match the input schema: Expected string\n  at ["text"]'
      )
    })
  )

  it("an input the kind's schema does not accept throws InvalidInput naming the kind, the agent and the field", () => {
    const error = (() => {
      try {
        AgentKind.agent(Measure, "measure-5", { text: 5 } as unknown as { text: string })
      } catch (thrown) {
        return thrown
      }
    })()
    assert.instanceOf(error, AgentKind.InvalidInput)
    const invalid = error as AgentKind.InvalidInput
    assert.strictEqual(invalid._tag, "InvalidInput")
    assert.strictEqual(invalid.kind, "measure")
    assert.strictEqual(invalid.agentId, "measure-5")
    assert.match(
      invalid.message,
      /^agent "measure-5" of kind "measure": input does not match the kind's input schema: /
    )
    assert.include(invalid.message, '["text"]')
  })

  it("an agent's default idempotency inputs name the kind and the encoded input", () => {
    const agent = AgentKind.agent(Measure, "a", { text: "abc" }, { inputs: ["extra"] })
    assert.deepStrictEqual(agent.inputs, ["kind:measure", '{"text":"abc"}', "extra"])
    assert.strictEqual(agent.labels.kind, "measure")
  })
})
