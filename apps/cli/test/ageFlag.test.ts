import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import { ageIssue, parseAge } from "../src/internal/ageFlag.ts"

const millis = (text: string) => {
  const age = parseAge(text)
  return age === undefined ? undefined : Duration.toMillis(age)
}

describe("ageFlag", () => {
  it("reads a number and one unit", () => {
    expect(millis("500ms")).toBe(500)
    expect(millis("90s")).toBe(90_000)
    expect(millis("30m")).toBe(1_800_000)
    expect(millis("12h")).toBe(43_200_000)
    expect(millis("7d")).toBe(604_800_000)
    expect(millis("1.5w")).toBe(907_200_000)
    expect(millis(" 2 d ")).toBe(172_800_000)
  })

  it("refuses what is not one", () => {
    for (const text of ["", "7", "7x", "d", "-1d", "1d 2h", "7 days", "1e3s", "Infinityd"]) {
      expect(parseAge(text), text).toBeUndefined()
    }
    expect(ageIssue("7x")).toBe(
      "--older-than 7x: expected a number with a unit (ms, s, m, h, d or w), such as 30m, 12h or 7d"
    )
  })
})
