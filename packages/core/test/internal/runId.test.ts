import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { stampOf } from "../../src/internal/runId.ts"

/** The stamp as `Date` formats it: the ISO time without separators and fraction. */
const isoStamp = (second: number): string =>
  new Date(second * 1000).toISOString().replace(/[-:]/g, "").replace(/\..*$/, "")

describe("run id stamp", () => {
  it("is the UTC time of the second, as Date's ISO format without separators", () => {
    assert.strictEqual(stampOf(0), "19700101T000000")
    assert.strictEqual(stampOf(951_782_400), "20000229T000000")
    assert.strictEqual(stampOf(-1), "19691231T235959")
    assert.strictEqual(stampOf(253_402_300_799), "99991231T235959")
  })

  it("agrees with Date for every second, outside years 0–9999 included", () => {
    fc.assert(
      fc.property(fc.integer({ min: -8_640_000_000_000, max: 8_640_000_000_000 }), (second) => {
        assert.strictEqual(stampOf(second), isoStamp(second))
      }),
      { numRuns: 20_000 }
    )
    fc.assert(
      fc.property(fc.integer({ min: -62_167_219_200, max: 253_402_300_799 }), (second) => {
        assert.strictEqual(stampOf(second), isoStamp(second))
      }),
      { numRuns: 20_000 }
    )
  })
})
