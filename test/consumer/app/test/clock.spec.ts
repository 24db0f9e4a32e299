import * as Testing from "@corral/core/Testing"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { expect, test } from "vitest"

test("two writers of one file serialize under TestClock", async () => {
  const timeline = new Testing.Timeline()
  const agents = [
    Testing.scripted(timeline, "a", { duration: "2 seconds" }, { claims: { write: ["x.ts"] } }),
    Testing.scripted(timeline, "b", { duration: "2 seconds" }, { claims: { write: ["x.ts"] } })
  ]
  const recorded = await Effect.runPromise(
    Testing.runScripted(agents, { concurrency: 2 }).pipe(Effect.provide(TestClock.layer()))
  )
  expect(recorded.result.wallMs).toBe(4000)
  expect(Testing.checkRun(agents, recorded, 2)).toEqual([])
  expect(Testing.checkTimeline(timeline, 2)).toEqual([])
})
