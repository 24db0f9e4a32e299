import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Corral, type Outcome } from "@corral/core"
import * as Blocking from "@corral/platform-node/Blocking"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"

const dir = mkdtempSync(join(tmpdir(), "corral-blocking-"))
const module = join(dir, "fns.mjs")
writeFileSync(
  module,
  `
export const sum = ({ xs }) => xs.reduce((a, b) => a + b, 0)
export const boom = () => { throw new RangeError("no way") }
export const hog = () => { const keep = []; for (;;) keep.push(new Array(1e5).fill(Math.random())) }
export const spin = () => { for (;;) {} }
export const tick = ({ counter }) => { const cells = new Int32Array(counter); for (;;) Atomics.add(cells, 0, 1) }
`
)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const byId = (outcomes: ReadonlyArray<Outcome.Outcome<unknown, unknown>>) =>
  Object.fromEntries(outcomes.map((o) => [o.agentId, o]))

describe("Blocking", () => {
  it.live(
    "runs functions in workers: a result, a throw, an exhausted memory limit and a timeout each get their own outcome",
    () =>
      Effect.gen(function* () {
        const result = yield* Corral.run(
          [
            Blocking.agent("sum", { module, export: "sum", input: { xs: [1, 2, 3] } }),
            Blocking.agent("boom", { module, export: "boom" }),
            Blocking.agent("hog", { module, export: "hog", resourceLimits: { maxOldGenerationSizeMb: 16 } }),
            Blocking.agent("spin", { module, export: "spin", timeout: "300 millis" }),
            Blocking.agent("missing", { module, export: "nope" })
          ],
          { concurrency: 5 }
        )
        const o = byId(result.outcomes)
        assert.deepStrictEqual(o.sum?._tag === "Succeeded" && o.sum.value, 6)
        assert.strictEqual(o.boom?._tag, "Failed")
        assert.strictEqual((o.boom as Outcome.Failed).message, "boom threw RangeError: no way")
        assert.strictEqual(o.hog?._tag, "Failed")
        assert.strictEqual((o.hog as Outcome.Failed).message, "hog ran out of memory (limit maxOldGenerationSizeMb=16)")
        assert.strictEqual(((o.hog as Outcome.Failed).error as Blocking.BlockingFailed).reason, "OutOfMemory")
        assert.strictEqual(o.spin?._tag, "TimedOut")
        assert.include((o.missing as Outcome.Failed).message, 'has no exported function "nope"')
      }),
    15_000
  )

  it.live(
    "interrupting the agent terminates its worker",
    () =>
      Effect.gen(function* () {
        const counter = new SharedArrayBuffer(4)
        const cells = new Int32Array(counter)
        const fiber = yield* Effect.forkChild(Blocking.run({ module, export: "tick", input: { counter } }))
        // the worker ticks once it is up, which can take a while on a loaded machine
        yield* Effect.suspend(() => (Atomics.load(cells, 0) > 0 ? Effect.void : Effect.fail("not started"))).pipe(
          Effect.retry({ schedule: Schedule.spaced("10 millis"), times: 1000 }),
          Effect.orDie
        )
        yield* Fiber.interrupt(fiber)
        const before = Atomics.load(cells, 0)
        yield* Effect.sleep("100 millis")
        assert.strictEqual(Atomics.load(cells, 0), before, "the worker stopped ticking")
      }),
    15_000
  )
})
