import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as PostgresOptions from "../src/PostgresOptions.ts"

const defectMessage = (effect: Effect.Effect<number>) =>
  Effect.map(Effect.exit(effect), (exit) => {
    const defect = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isDieReason)?.defect : undefined
    assert.instanceOf(defect, PostgresOptions.InvalidOption)
    return (defect as Error).message
  })

describe("PostgresOptions", () => {
  it.effect("duration reads as DurationOption: intervals above 0 and finite, the rest at least 0", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* PostgresOptions.duration("M", "every", "2 seconds", true), 2000)
      assert.strictEqual(yield* PostgresOptions.duration("M", "every", { seconds: 1, milliseconds: 5 }, true), 1005)
      assert.strictEqual(yield* PostgresOptions.duration("M", "wait", 0, false), 0)
      assert.strictEqual(yield* PostgresOptions.duration("M", "wait", "Infinity", false), Number.POSITIVE_INFINITY)
      assert.strictEqual(
        yield* defectMessage(PostgresOptions.duration("M", "every", 0, true)),
        "M every: must be a positive, finite duration, got 0"
      )
      assert.strictEqual(
        yield* defectMessage(PostgresOptions.duration("M", "wait", -1, false)),
        "M wait: must not be negative, got -1"
      )
      for (const positive of [true, false]) {
        assert.strictEqual(
          yield* defectMessage(PostgresOptions.duration("M", "x", { seconds: true } as never, positive)),
          "M x: duration field seconds must be a number, got boolean"
        )
        assert.strictEqual(
          yield* defectMessage(PostgresOptions.duration("M", "x", {} as never, positive)),
          'M x: expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}'
        )
      }
    })
  )

  it.effect("wholeNumber takes whole numbers in its range and names the option otherwise", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* PostgresOptions.wholeNumber("M", "port", 65_535, 1, 65_535), 65_535)
      assert.strictEqual(
        yield* defectMessage(PostgresOptions.wholeNumber("M", "port", 1.5, 1, 65_535)),
        "M port: must be a whole number from 1 to 65535, got 1.5"
      )
      assert.strictEqual(
        yield* defectMessage(PostgresOptions.wholeNumber("M", "capacity", 0, 1)),
        "M capacity: must be a whole number from 1 up, got 0"
      )
    })
  )
})
