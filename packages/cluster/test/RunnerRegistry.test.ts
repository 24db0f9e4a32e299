import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Tracer } from "effect"
import { sharedServer } from "../../postgres/test/support/server.ts"
import { PostgresClient } from "@corral/postgres"
import * as RunnerRegistry from "../src/RunnerRegistry.ts"

const server = await sharedServer()

/** The SQL text of every statement run under it, read from the spans the statements make. */
const statementsTracer = (texts: Array<string>) =>
  Tracer.make({
    span(options) {
      const span = Tracer.nativeTracer.span(options)
      const attribute = span.attribute.bind(span)
      span.attribute = (key, value) => {
        if (key === "db.query.text") texts.push(String(value))
        attribute(key, value)
      }
      return span
    }
  })

describe.skipIf(server === undefined)("RunnerRegistry", () => {
  it.live("list({ migrate: false }) runs one statement per read; the default also checks the migrations", () =>
    Effect.gen(function* () {
      const texts: Array<string> = []
      const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.suspend(() => {
          texts.length = 0
          return Effect.map(Effect.withTracer(effect, statementsTracer(texts)), () => texts.length)
        })
      yield* RunnerRegistry.list()
      const checked = yield* counted(RunnerRegistry.list())
      assert.isAbove(checked, 1, "the default read checks the migrations first")
      const plain = yield* counted(RunnerRegistry.list(10_000, { migrate: false }))
      assert.strictEqual(plain, 1)
      assert.match(texts[0]!, /FROM corral_runners/)
    }).pipe(
      Effect.provide(
        Effect.map(Effect.orDie(server!.createDatabase()), (url) =>
          PostgresClient.layer(url, { maxConnections: 1 })
        ).pipe(Layer.unwrap)
      )
    )
  )
})
