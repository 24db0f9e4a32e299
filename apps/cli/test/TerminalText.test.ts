import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import stringWidth from "string-width"
import wrapAnsi from "wrap-ansi"
import * as TerminalText from "../src/TerminalText.ts"

describe("TerminalText", () => {
  it("clean removes escape sequences and control characters", () => {
    expect(TerminalText.clean("\u001b[2J\u001b]0;title\u0007\u001b[31mred\u001b[0m\tend\r")).toBe("red end")
    expect(TerminalText.clean("a\u0000b\u0085c")).toBe("abc")
  })

  it("width counts display columns of wide and combining characters", () => {
    expect(TerminalText.width("漢字")).toBe(4)
    expect(TerminalText.width("e\u0301")).toBe(1)
    expect(TerminalText.width("ｗｉｄｅ")).toBe(8)
  })

  it("fit cuts by display width and marks the cut", () => {
    expect(TerminalText.fit("漢字漢字", 5)).toBe("漢字…")
    expect(TerminalText.width(TerminalText.fit("漢字漢字", 5))).toBeLessThanOrEqual(5)
    expect(TerminalText.fit("short", 10)).toBe("short")
  })

  it("wrap keeps long words whole; wrapHard breaks them", () => {
    expect(TerminalText.wrap("take it with: corral/20261125-231816-k3f9/integration", 20).split("\n")).toContain(
      "corral/20261125-231816-k3f9/integration"
    )
    for (const line of TerminalText.wrapHard("corral/20261125-231816-k3f9/integration", 10).split("\n"))
      expect(TerminalText.width(line)).toBeLessThanOrEqual(10)
  })

  it("printable ASCII measures and wraps as string-width and wrap-ansi do (they are loaded only for other text)", () => {
    const ascii = fc.string({ unit: fc.constantFrom(..." -/.:,abcXYZ09~".split(""), " ", " "), maxLength: 40 })
    fc.assert(
      fc.property(ascii, fc.integer({ min: 0, max: 45 }), (text, columns) => {
        expect(TerminalText.width(text)).toBe(stringWidth(text))
        expect(TerminalText.wrap(text, columns)).toBe(
          wrapAnsi(text, Math.max(20, columns), { hard: false, trim: true })
        )
        expect(TerminalText.wrapHard(text, columns)).toBe(
          wrapAnsi(text, Math.max(1, columns), { hard: true, trim: true })
        )
      }),
      { seed: 20261127, numRuns: 2000 }
    )
    expect(TerminalText.width("\u001b[31mred\u001b[0m")).toBe(3)
    expect(TerminalText.wrap("a\u001b[31m b\u001b[0m", 20)).toBe(
      wrapAnsi("a\u001b[31m b\u001b[0m", 20, { hard: false, trim: true })
    )
  })
})
