import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import type * as Core from "@corral/core"
import type { ClaimJob } from "./workload.ts"

/**
 * corral's own claim policy without its CPU cost: the jobs run under `TestClock` (each exactly
 * `workMs`), and the result is the makespan in virtual time — what corral's decisions alone give,
 * to set beside the greedy policy's virtual-time makespan and the bound.
 */
export const corralVirtualMakespan = async (
  { Agent, Corral }: Pick<typeof Core, "Agent" | "Corral">,
  jobs: ReadonlyArray<ClaimJob>,
  workMs: number,
  concurrency: number,
  maxBypass?: number
): Promise<number> => {
  const ends = new Array<number>(jobs.length).fill(0)
  const agents = jobs.map((job, index) =>
    Agent.make(job.id, {
      run: Effect.andThen(
        Effect.sleep(workMs),
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            ends[index] = clock.currentTimeMillisUnsafe()
          })
        )
      ),
      claims: { write: job.keys }
    })
  )
  const options = { concurrency, ...(maxBypass === undefined ? {} : { maxBypass }) }
  return Effect.runPromise(
    Effect.gen(function* () {
      const fiber = yield* Effect.forkChild(Corral.run(agents, options), { startImmediately: true })
      yield* Effect.yieldNow
      while (fiber.pollUnsafe() === undefined) {
        yield* TestClock.adjust(1)
        yield* Effect.yieldNow
      }
      const result = yield* Fiber.join(fiber)
      if (!result.allSucceeded) throw new Error("a claims run in virtual time failed")
      return Math.max(...ends)
    }).pipe(Effect.provide(TestClock.layer()))
  )
}
