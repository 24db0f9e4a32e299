import { DurationOption } from "@corral/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Result from "effect/Result"
import fc from "fast-check"

const { millis, intervalMillis } = DurationOption

/** A duration input in milliseconds as `Duration` reads it: what `millis` answered before its whole-number shortcut. */
const viaDuration = (input: Duration.Input): Result.Result<number | undefined, string> => {
  if (typeof input === "number" && !Number.isFinite(input) && input > 0) return Result.succeed(Number.POSITIVE_INFINITY)
  if (Number.isNaN(input)) return Result.fail("must be a number of milliseconds, got NaN")
  const duration = Duration.fromInput(input)
  if (duration._tag === "None") return Result.fail(`expected a duration, got ${JSON.stringify(input)}`)
  const ms = Duration.toMillis(duration.value)
  if (Number.isNaN(ms) || ms < 0) return Result.fail(`must not be negative, got ${JSON.stringify(input)}`)
  return Result.succeed(ms)
}

const outcome = (result: Result.Result<number | undefined, string>) =>
  Result.isSuccess(result) ? { ms: result.success } : { failure: result.failure.split(",")[0] }

const showObject = (input: Readonly<Record<string, number>>): string =>
  `{${Object.entries(input)
    .map(([key, value]) => `${JSON.stringify(key)}:${value}`)
    .join(",")}}`

describe("DurationOption", () => {
  it("reads a number of milliseconds as Duration does, whole or not, negative or not, and refuses NaN (which Duration reads as 0)", () => {
    const numbers = fc.oneof(
      fc.integer(),
      fc.nat(),
      fc.double(),
      fc.constantFrom(0, -0, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, 1e300, Number.NaN),
      fc.constantFrom(Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY)
    )
    fc.assert(
      fc.property(numbers, (input) => {
        const got = outcome(millis(input))
        assert.deepStrictEqual(got, outcome(viaDuration(input)), String(input))
        if ("ms" in got) assert.isFalse(Object.is(got.ms, -0))
      }),
      { numRuns: 2000 }
    )
    assert.deepStrictEqual(outcome(millis("2 seconds")), { ms: 2000 })
    assert.deepStrictEqual(outcome(millis(undefined)), { ms: undefined })
  })

  it("accepts every duration shape effect reads as given", () => {
    const accepted: ReadonlyArray<readonly [Duration.Input, number]> = [
      [{ seconds: 30 }, 30_000],
      [{ seconds: 1, milliseconds: -500 }, 500],
      [{ minutes: 1, seconds: undefined }, 60_000],
      [{ seconds: 0 }, 0],
      [[1, 500_000_000], 1500],
      [Duration.seconds(2), 2000],
      ["1.5 seconds", 1500],
      [3n * 1_000_000n, 3],
      [{ hours: Number.POSITIVE_INFINITY }, Number.POSITIVE_INFINITY]
    ]
    for (const [input, ms] of accepted) assert.deepStrictEqual(outcome(millis(input)), { ms }, String(input))
  })

  it("refuses the object inputs effect misreads, with the reason", () => {
    const refused: ReadonlyArray<readonly [unknown, string]> = [
      [{ seconds: true }, "duration field seconds must be a number, got boolean"],
      [{ milliseconds: "5" }, "duration field milliseconds must be a number, got string"],
      [{ seconds: Number.NaN }, "duration field seconds must be a number, got NaN"],
      [{ seconds: null }, "duration field seconds must be a number, got null"],
      [{}, 'expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got {}'],
      [
        { second: 5 },
        'unknown duration field "second" (known: weeks, days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds)'
      ],
      [[1, Number.NaN], "expected [seconds, nanoseconds] as two numbers, got [1,NaN]"],
      [
        { hours: Number.POSITIVE_INFINITY, seconds: Number.NEGATIVE_INFINITY },
        'duration fields add up to Infinity - Infinity, which is no duration, got {"hours":Infinity,"seconds":-Infinity}'
      ]
    ]
    for (const [input, reason] of refused) {
      assert.strictEqual(Duration.fromInput(input as Duration.Input)._tag, "Some", "effect reads it")
      assert.deepStrictEqual(millis(input as Duration.Input), Result.fail(reason), JSON.stringify(input))
      assert.deepStrictEqual(intervalMillis(input as Duration.Input), Result.fail(reason), JSON.stringify(input))
    }
  })

  it("an object of known fields: read as effect reads it when every field is a number, else refused naming the field", () => {
    const fieldNames = ["weeks", "days", "hours", "minutes", "seconds", "milliseconds", "microseconds", "nanoseconds"]
    const numbers = fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.double({ min: -1e6, max: 1e6, noNaN: true }))
    const objects = fc.dictionary(fc.constantFrom(...fieldNames), numbers, { minKeys: 1 })
    fc.assert(
      fc.property(objects, (input) => {
        const ms = Duration.toMillis(Duration.fromInputUnsafe(input as Duration.Input))
        const expected = ms >= 0 ? Result.succeed(ms) : Result.fail(`must not be negative, got ${showObject(input)}`)
        assert.deepStrictEqual(millis(input as Duration.Input), expected, JSON.stringify(input))
      }),
      { numRuns: 1000 }
    )
    const wrong = fc.oneof(fc.string(), fc.boolean(), fc.constant(null), fc.constant(Number.NaN))
    fc.assert(
      fc.property(objects, fc.constantFrom(...fieldNames), wrong, (valid, field, value) => {
        const input = { ...valid, [field]: value }
        const got = millis(input as Duration.Input)
        assert.isTrue(Result.isFailure(got), JSON.stringify(input))
        assert.match(
          Result.isFailure(got) ? got.failure : "",
          /^duration field \w+ must be a number, got (string|boolean|null|NaN)$/
        )
      }),
      { numRuns: 1000 }
    )
  })

  it("intervalMillis: above 0 and finite, or why not", () => {
    assert.deepStrictEqual(intervalMillis("100 millis"), Result.succeed(100))
    assert.deepStrictEqual(intervalMillis({ seconds: 1.5 }), Result.succeed(1500))
    for (const [input, shown] of [
      [0, "0"],
      [-5, "-5"],
      ["-1 second", '"-1 second"'],
      [Number.POSITIVE_INFINITY, "Infinity"],
      [{ hours: Number.POSITIVE_INFINITY }, '{"hours":Infinity}'],
      [Duration.infinity, '{"_id":"Duration","_tag":"Infinity"}']
    ] as const) {
      assert.deepStrictEqual(
        intervalMillis(input as Duration.Input),
        Result.fail(`must be a positive, finite duration, got ${shown}`),
        String(input)
      )
    }
    assert.deepStrictEqual(
      intervalMillis("soon" as Duration.Input),
      Result.fail('expected a duration such as "30 seconds", a number of milliseconds or { seconds: 30 }, got "soon"')
    )
  })
})
