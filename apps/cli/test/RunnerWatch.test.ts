import { PostgresClient } from "@corral/postgres"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Queue, Tracer } from "effect"
import { TestClock } from "effect/testing"
import { sharedServer } from "../../../packages/postgres/test/support/server.ts"
import * as RunnerWatch from "../src/RunnerWatch.ts"

const server = await sharedServer()

/**
 * A tracer that counts the SQL statements run under it (from the spans statements make) and offers
 * the count of each registry read, when its query of `corral_runners` ends.
 */
const readsTracer = (reads: Queue.Queue<number>) => {
  let statements = 0
  return Tracer.make({
    span(options) {
      const span = Tracer.nativeTracer.span(options)
      const attribute = span.attribute.bind(span)
      const end = span.end.bind(span)
      let read = false
      span.attribute = (key, value) => {
        if (key === "db.query.text") {
          statements++
          read = /FROM corral_runners\s/.test(String(value))
        }
        attribute(key, value)
      }
      span.end = (endTime, exit) => {
        end(endTime, exit)
        if (!read) return
        Queue.offerUnsafe(reads, statements)
        statements = 0
      }
      return span
    }
  })
}

describe.skipIf(server === undefined)("RunnerWatch", () => {
  it.effect("checks the registry's migrations on its first read only: one statement per later read", () =>
    Effect.gen(function* () {
      const reads = yield* Queue.unbounded<number>()
      const notes: Array<string> = []
      const watch = RunnerWatch.make(new Map([["a", undefined]]), "corral runner", (note) => notes.push(note))
      watch.onEvent({ _tag: "Started", agentId: "a" })
      const fiber = yield* Effect.forkChild(Effect.withTracer(watch.run, readsTracer(reads)))
      const counts: Array<number> = []
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust("5 seconds")
        counts.push(yield* Queue.take(reads))
      }
      yield* Fiber.interrupt(fiber)
      assert.isAbove(counts[0]!, 1, "the first read checks the migrations")
      assert.deepStrictEqual(counts.slice(1), [1, 1])
      assert.deepStrictEqual(notes.length, 1, notes.join("\n"))
      assert.match(notes[0]!, /no runner is alive: agent a waits/)
    }).pipe(
      Effect.provide(
        Layer.unwrap(
          Effect.map(Effect.orDie(server!.createDatabase()), (url) => PostgresClient.layer(url, { maxConnections: 1 }))
        )
      )
    )
  )
})
