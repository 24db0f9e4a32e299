import { PostgresClient } from "@corral/postgres"
import { assert, describe, it } from "@effect/vitest"
import { AgentKind, Corral, Executor } from "@corral/core"
import { Effect, Layer, Schema } from "effect"
import { sharedServer } from "../../postgres/test/support/server.ts"
import * as AgentOutput from "../src/AgentOutput.ts"

const server = await sharedServer()

const execution = { runId: "r1", agentId: "a", attempt: 1, fencingToken: 7 }

describe("AgentOutput", () => {
  it.effect("stores at most maxLinesPerExecution lines of one execution, then says how many were dropped", () =>
    Effect.gen(function* () {
      const written: Array<AgentOutput.Line> = []
      const sink: AgentOutput.Sink = { write: (lines) => Effect.sync(() => written.push(...lines)) }
      const { onLine, finish } = yield* Effect.scoped(AgentOutput.capture(execution)).pipe(
        Effect.provideService(AgentOutput.CurrentSink, sink)
      )
      for (let i = 0; i < AgentOutput.maxLinesPerExecution + 5; i++) onLine!({ stream: "stdout", text: `line ${i}` })
      yield* finish
      assert.strictEqual(written.length, AgentOutput.maxLinesPerExecution + 1)
      assert.strictEqual(written[0]!.text, "line 0")
      assert.strictEqual(written.at(-2)!.text, `line ${AgentOutput.maxLinesPerExecution - 1}`)
      assert.match(written.at(-1)!.text, /^corral: 5 more lines were not stored/)
      assert.deepStrictEqual({ ...written[0]!, at: 0 }, { ...execution, stream: "stdout", text: "line 0", at: 0 })
    })
  )

  it.live("capturingLogs stores the log lines of a kind's agents as their output, warnings and errors on stderr", () =>
    Effect.gen(function* () {
      const written: Array<AgentOutput.Line> = []
      const sink: AgentOutput.Sink = { write: (lines) => Effect.sync(() => written.push(...lines)) }
      const Greet = AgentKind.make("greet", {
        input: Schema.Struct({ name: Schema.String }),
        output: Schema.String,
        handler: ({ name }) =>
          Effect.gen(function* () {
            yield* Effect.log("hello", name, { n: 1 })
            yield* Effect.logWarning("careful\nsecond line")
            return `hi ${name}`
          })
      })
      const result = yield* Corral.run([AgentKind.agent(Greet, "greeter", { name: "ada" })], { runId: "logs-1" }).pipe(
        Effect.provide(Executor.layerLocal([AgentOutput.capturingLogs(Greet)])),
        Effect.provideService(AgentOutput.CurrentSink, sink)
      )
      assert.strictEqual(result.get("greeter")!._tag, "Succeeded")
      assert.deepStrictEqual(
        written.map((line) => [line.runId, line.agentId, line.attempt, line.stream, line.text]),
        [
          ["logs-1", "greeter", 1, "stdout", '[Info] hello ada {"n":1}'],
          ["logs-1", "greeter", 1, "stderr", "[Warn] careful"],
          ["logs-1", "greeter", 1, "stderr", "second line"]
        ]
      )
    })
  )

  it.effect("without a sink, nothing is captured", () =>
    Effect.gen(function* () {
      const { onLine } = yield* Effect.scoped(AgentOutput.capture(execution))
      assert.isUndefined(onLine)
    })
  )

  it.live.skipIf(server === undefined)(
    "stores lines in Postgres and reads one agent's lines of the given runs in order, after a position",
    () =>
      Effect.gen(function* () {
        const sink = yield* AgentOutput.make("127.0.0.1:9001")
        const line = (runId: string, agentId: string, text: string): AgentOutput.Line => ({
          ...execution,
          runId,
          agentId,
          stream: "stdout",
          text,
          at: 1
        })
        yield* sink.write([line("r1", "a", "one"), line("r1", "b", "other agent"), line("r2", "a", "other run")])
        yield* sink.write([line("r1", "a", "two")])
        const all = yield* AgentOutput.read(["r1"], "a")
        assert.deepStrictEqual(
          all.map((stored) => [stored.text, stored.runner, stored.fencingToken]),
          [
            ["one", "127.0.0.1:9001", 7],
            ["two", "127.0.0.1:9001", 7]
          ]
        )
        const later = yield* AgentOutput.read(["r1", "r2"], "a", all[0]!.id)
        assert.deepStrictEqual(
          later.map((stored) => stored.text),
          ["other run", "two"]
        )
      }).pipe(
        Effect.provide(
          Layer.unwrap(
            Effect.map(Effect.orDie(Effect.suspend(() => server!.createDatabase())), (url) =>
              Layer.orDie(PostgresClient.layer(url, { maxConnections: 2 }))
            )
          )
        )
      ),
    60_000
  )
})
