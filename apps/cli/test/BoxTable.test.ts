import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { createRequire } from "node:module"
import * as BoxTable from "../src/BoxTable.ts"

/**
 * `cli-table3` colors through `@colors/colors`, which also decides by itself whether colors are
 * supported (off when `CI` is set, when stdout is not a terminal, …); corral decides that once (its
 * output mode), so the comparison turns the library's own check on for the test and back after.
 */
const libraryColors = createRequire(createRequire(import.meta.url).resolve("cli-table3"))("@colors/colors/safe") as {
  enabled: boolean
}
const wasEnabled = libraryColors.enabled
beforeAll(() => {
  libraryColors.enabled = true
})
afterAll(() => {
  libraryColors.enabled = wasEnabled
})

/** Cells of printable ASCII, blanks at either end and several lines included. */
const cell = fc.string({ unit: fc.constantFrom(..." -/.:,abcXYZ09~$".split("")), maxLength: 14 })
const lines = fc.array(cell, { minLength: 1, maxLength: 3 }).map((parts) => parts.join("\n"))

const spec = fc.integer({ min: 1, max: 5 }).chain((columns) =>
  fc.record({
    head: fc.array(cell, { minLength: columns, maxLength: columns }),
    rows: fc.array(fc.array(lines, { minLength: columns, maxLength: columns }), { maxLength: 6 }),
    widths: fc.array(fc.integer({ min: 2, max: 18 }), { minLength: columns, maxLength: columns }),
    color: fc.boolean()
  })
)

describe("BoxTable", () => {
  it("draws every table as cli-table3 does, itself when the cells fit in printable ASCII", () => {
    fc.assert(
      fc.property(spec, (table) => {
        expect(BoxTable.render(table)).toBe(BoxTable.withLibrary(table))
      }),
      { seed: 20261127, numRuns: 3000 }
    )
  })

  it("draws the summary's usual table itself, and wide or escaped text with cli-table3", () => {
    const table = { head: ["agent", "outcome"], rows: [["fmt-pkg0", "succeeded"]], widths: [12, 11], color: false }
    expect(BoxTable.render(table)).toBe(
      [
        "┌────────────┬───────────┐",
        "│ agent      │ outcome   │",
        "│ fmt-pkg0   │ succeeded │",
        "└────────────┴───────────┘"
      ].join("\n")
    )
    for (const odd of ["漢字", "\u001b[31mred\u001b[39m"]) {
      const withOdd = { ...table, rows: [[odd, "failed"]] }
      expect(BoxTable.render(withOdd)).toBe(BoxTable.withLibrary(withOdd))
    }
  })
})
