import { assert, describe, it } from "@effect/vitest"
import * as Sampler from "../../src/internal/processSampler.ts"

/** Resolves once `count` samples of an entry added with `onSample` were taken; removes the entry then. */
const sampled = (count: number, onSample: (sample: number) => void = () => undefined) =>
  new Promise<void>((resolve) => {
    const entry = Sampler.add(false, (sample) => {
      onSample(sample)
      if (sample < count) return
      Sampler.remove(entry)
      resolve()
    })
  })

describe("processSampler", () => {
  it("samples entries added at different times in the same timer callback", async () => {
    let firstSampledThisTurn = false
    let shared = 0
    const second = Promise.withResolvers<Promise<void>>()
    const first = Sampler.add(false, (sample) => {
      firstSampledThisTurn = true
      // Microtasks run once the timer's callback has sampled every entry.
      queueMicrotask(() => {
        firstSampledThisTurn = false
      })
      if (sample === 1)
        second.resolve(
          sampled(3, () => {
            if (firstSampledThisTurn) shared += 1
          })
        )
    })
    await await second.promise
    Sampler.remove(first)
    assert.strictEqual(shared, 3)
  })

  it("numbers each entry's samples from 1 and drops an entry whose callback throws", async () => {
    let thrown = 0
    Sampler.add(false, () => {
      thrown += 1
      throw new Error("broken watchdog")
    })
    const numbers: Array<number> = []
    await sampled(3, (sample) => numbers.push(sample))
    assert.deepStrictEqual(numbers, [1, 2, 3])
    assert.strictEqual(thrown, 1)
  })
})
