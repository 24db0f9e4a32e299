import { format } from "node:util"
import { Agent, Corral } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Console, Effect, Logger } from "effect"

describe("log annotations under effect's default logger", () => {
  it.effect("print the run and agent ids, not [Getter] (the logger hands the object to console.log)", () =>
    Effect.gen(function* () {
      const printed: Array<string> = []
      const console = { ...globalThis.console, log: (...args: Array<unknown>) => printed.push(format(...args)) }
      yield* Corral.run([Agent.make("a", { run: Effect.log("hello") })], { runId: "r1" }).pipe(
        Effect.provideService(Console.Console, console),
        Effect.provide(Logger.layer([Logger.defaultLogger]))
      )
      assert.strictEqual(printed.length, 1)
      assert.include(printed[0], "hello { 'corral.run.id': 'r1', 'corral.agent.id': 'a' }")
    })
  )
})
