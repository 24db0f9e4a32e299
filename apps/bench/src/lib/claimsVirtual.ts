import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import type * as Core from "@corral/core"
import type { ClaimJob } from "./workload.ts"

/** corral's makespan for `jobs`, each exactly `workMs` long, at `concurrency` (and `maxBypass` when given). */
type Makespan = (
  core: Pick<typeof Core, "Agent" | "Corral">,
  jobs: ReadonlyArray<ClaimJob>,
  workMs: number,
  concurrency: number,
  maxBypass?: number
) => Promise<number>

const runOptions = (concurrency: number, maxBypass: number | undefined) => ({
  concurrency,
  ...(maxBypass === undefined ? {} : { maxBypass })
})

/** One agent per job that sleeps `workMs` under its write claims and records when it ended (`now`). */
const sleepingAgents = (
  Agent: typeof Core.Agent,
  jobs: ReadonlyArray<ClaimJob>,
  workMs: number,
  now: Effect.Effect<number>
) => {
  const ends = new Array<number>(jobs.length).fill(0)
  const agents = jobs.map((job, index) =>
    Agent.make(job.id, {
      run: Effect.andThen(
        Effect.sleep(workMs),
        Effect.map(now, (at) => {
          ends[index] = at
        })
      ),
      claims: { write: job.keys }
    })
  )
  return { agents, ends }
}

/**
 * corral's own claim policy without its CPU cost: the jobs run under `TestClock` (each exactly
 * `workMs`), and the result is the makespan in virtual time — what corral's decisions alone give,
 * to set beside the greedy policy's virtual-time makespan and the bound.
 */
export const corralVirtualMakespan: Makespan = async ({ Agent, Corral }, jobs, workMs, concurrency, maxBypass) => {
  const { agents, ends } = sleepingAgents(
    Agent,
    jobs,
    workMs,
    Effect.clockWith((clock) => Effect.sync(() => clock.currentTimeMillisUnsafe()))
  )
  const options = runOptions(concurrency, maxBypass)
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

/**
 * A virtual clock whose timers fire as Node.js fires due timers: every timer due at the earliest
 * pending instant runs in one phase, one callback after another (each resumes its fiber at once),
 * and only then do the scheduler's tasks (`setImmediate`) run. `TestClock` instead resumes one
 * sleeper at a time and lets it and what it scheduled settle before the next, so a scheduler that
 * decides once per event-loop turn cannot batch under it. Hand-written: effect provides no such
 * clock.
 */
class InstantClock implements Clock.Clock {
  now = 0
  private seq = 0
  private readonly timers: Array<{ at: number; seq: number; fire: () => void; live: boolean }> = []
  get pending(): number {
    return this.timers.length
  }
  currentTimeMillisUnsafe(): number {
    return this.now
  }
  readonly currentTimeMillis = Effect.sync(() => this.now)
  currentTimeNanosUnsafe(): bigint {
    return BigInt(this.now) * 1_000_000n
  }
  readonly currentTimeNanos = Effect.sync(() => this.currentTimeNanosUnsafe())
  monotonicTimeNanosUnsafe(): bigint {
    return this.currentTimeNanosUnsafe()
  }
  readonly monotonicTimeNanos = Effect.sync(() => this.currentTimeNanosUnsafe())
  sleep(duration: Duration.Input): Effect.Effect<void> {
    const millis = Duration.toMillis(Duration.fromInputUnsafe(duration))
    if (millis <= 0) return Effect.yieldNow
    return Effect.callback<void>((resume) => {
      const timer = { at: this.now + millis, seq: this.seq++, fire: () => resume(Effect.void), live: true }
      this.timers.push(timer)
      return Effect.sync(() => {
        timer.live = false
      })
    })
  }
  /** Advances to the earliest pending instant and fires every timer due then, in the order they were set. */
  fireNext(): void {
    const live = this.timers.filter((timer) => timer.live)
    this.timers.length = 0
    if (live.length === 0) return
    let at = Infinity
    for (const timer of live) at = Math.min(at, timer.at)
    this.now = at
    const due = live.filter((timer) => timer.at === at).sort((a, b) => a.seq - b.seq)
    for (const timer of live) if (timer.at !== at) this.timers.push(timer)
    for (const timer of due) timer.fire()
  }
}

/**
 * Lets the scheduler's tasks run to quiescence between instants: a 1 ms real timer (Node.js does not
 * block in its poll phase while `setImmediate` tasks are pending, so a chain of them runs meanwhile)
 * and a few more event-loop iterations for a chain that took longer.
 */
const settle = async (): Promise<void> => {
  await new Promise<void>((resolve) => setTimeout(resolve, 0))
  for (let i = 0; i < 4; i++) await new Promise<void>((resolve) => setImmediate(resolve))
}

/**
 * Runs `make(clock)` under an `InstantClock`: between instants the scheduler's tasks settle, then
 * every timer due at the next instant fires. Fails when the effect waits with no timer pending.
 */
export const runAtInstants = async <A, E>(
  make: (clock: { readonly now: number }) => Effect.Effect<A, E>
): Promise<A> => {
  const clock = new InstantClock()
  const fiber = Effect.runFork(Effect.provideService(make(clock), Clock.Clock, clock))
  for (;;) {
    await settle()
    if (fiber.pollUnsafe() !== undefined) break
    if (clock.pending === 0) throw new Error("an effect under InstantClock waits with no timer pending")
    clock.fireNext()
  }
  return Effect.runPromise(Fiber.join(fiber))
}

/**
 * corral's makespan with every agent exactly `workMs` long, under a clock that fires all timers due
 * at an instant in one phase before the scheduler's tasks run (as Node.js does; see `InstantClock`):
 * what corral's decisions give when several agents end at once, without its CPU cost.
 */
export const corralInstantMakespan: Makespan = async ({ Agent, Corral }, jobs, workMs, concurrency, maxBypass) => {
  const options = runOptions(concurrency, maxBypass)
  let ends: ReadonlyArray<number> = []
  const result = await runAtInstants((clock) => {
    const made = sleepingAgents(
      Agent,
      jobs,
      workMs,
      Effect.sync(() => clock.now)
    )
    ends = made.ends
    return Corral.run(made.agents, options)
  })
  if (!result.allSucceeded) throw new Error("a claims run under InstantClock failed")
  return Math.max(...ends)
}
