import { Agent, Corral, CorralEvent } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import { Console, Effect, Fiber } from "effect"
import { TestClock, TestConsole } from "effect/testing"

describe("README example", () => {
  it.effect("two writers serialize while a third runs beside them, and the waiting event is printed", () =>
    Effect.gen(function* () {
      const log = (e: CorralEvent.CorralEvent) =>
        e._tag === "WaitingForClaims"
          ? Console.log(`${e.agentId} waits for ${e.blockers.map(CorralEvent.formatBlocker).join(", ")}`)
          : e._tag === "Started"
            ? Console.log(`${e.agentId} started`)
            : Effect.void
      const fiber = yield* Effect.forkChild(
        Corral.run(
          [
            Agent.make("edit-parser", { run: Effect.sleep("2 seconds"), claims: { write: ["src/parser.ts"] } }),
            Agent.make("parser-tests", { run: Effect.sleep("1 second"), claims: { write: ["src/parser.ts"] } }),
            Agent.make("docs", { run: Effect.sleep("1 second"), claims: { write: ["docs/"] } })
          ],
          { concurrency: 3, onEvent: log }
        ),
        { startImmediately: true }
      )
      yield* TestClock.adjust("5 seconds")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(yield* TestConsole.logLines, [
        "edit-parser started",
        "parser-tests waits for src/parser.ts (write, held by edit-parser)",
        "docs started",
        "parser-tests started"
      ])
      assert.strictEqual(result.get("parser-tests")!.startedAt, 2000)
    })
  )
})
