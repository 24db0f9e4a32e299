/**
 * A test kit for code that uses corral: scripted agents whose durations, results and failures are
 * given up front, a runner that drives a run under `TestClock` and returns its full event log and
 * timeline, and invariant checks to reuse in your own tests.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Result from "effect/Result"
import * as TestClock from "effect/testing/TestClock"
import * as Agent from "./Agent.ts"
import * as Claims from "./Claims.ts"
import * as Corral from "./Corral.ts"
import { millis } from "./DurationOption.ts"
import type { CorralEvent } from "./CorralEvent.ts"
import type { InvalidRun } from "./CorralError.ts"
import type { RunResult } from "./RunResult.ts"
import * as Usage from "./Usage.ts"

/**
 * What a scripted agent does: wait `duration` of (virtual) time, then succeed with `result`, fail
 * with `fail` or die with `die`. `failTimes` fails the first attempts and then succeeds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Script<A = unknown> {
  readonly duration?: Duration.Input | undefined
  readonly result?: A | undefined
  readonly fail?: unknown
  readonly die?: unknown
  readonly failTimes?: number | undefined
  readonly usage?: Partial<Usage.Usage> | undefined
}

/**
 * When each agent ran, in virtual time.
 *
 * @since 0.1.0
 * @category models
 */
export interface Interval {
  readonly agentId: string
  readonly start: number
  readonly end: number
  readonly claims: Claims.Claims | undefined
  readonly completed: boolean
}

/**
 * Records the intervals of scripted agents.
 *
 * @since 0.1.0
 * @category models
 */
export class Timeline {
  readonly intervals: Array<Interval> = []
  readonly finalized: Array<string> = []
}

/**
 * A scripted agent for tests. It records when it ran into `timeline` and runs its finalizer
 * (recorded in `timeline.finalized`) on every exit, interruption included.
 *
 * @example
 * ```ts
 * import * as Testing from "@corral/core/Testing"
 *
 * const timeline = new Testing.Timeline()
 * const agent = Testing.scripted(timeline, "a", { duration: "2 seconds", result: 1 }, { claims: { write: ["x"] } })
 * ```
 * @since 0.1.0
 * @category constructors
 */
export const scripted = <A = unknown, const Id extends string = string>(
  timeline: Timeline,
  id: Id,
  script: Script<A>,
  options: Omit<Agent.Options<A, unknown, never>, "run"> = {}
): Agent.Agent<A, unknown, never, Id> => {
  let attempt = 0
  const duration = millis(script.duration)
  const run = Effect.gen(function* () {
    attempt++
    const start = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    let completed = false
    yield* Effect.addFinalizer(() =>
      Effect.clockWith((clock) =>
        Effect.sync(() => {
          timeline.intervals.push({
            agentId: id,
            start,
            end: clock.currentTimeMillisUnsafe(),
            claims: options.claims,
            completed
          })
          timeline.finalized.push(id)
        })
      )
    )
    if (Result.isFailure(duration))
      return yield* Effect.die(new InvalidOption({ option: "duration", reason: duration.failure }))
    if (duration.success !== undefined) yield* Effect.sleep(duration.success)
    if (script.usage !== undefined) yield* Usage.report(script.usage)
    completed = true
    if (script.die !== undefined) return yield* Effect.die(script.die)
    if (script.fail !== undefined && (script.failTimes === undefined || attempt <= script.failTimes)) {
      return yield* Effect.fail(script.fail)
    }
    return script.result as A
  }).pipe(Effect.scoped)
  return Agent.make(id, { ...options, run })
}

/**
 * The result of `runScripted`: the run's result, every event in order and the timeline.
 *
 * @since 0.1.0
 * @category models
 */
export interface Recorded<A, E> {
  readonly result: RunResult<A, E>
  readonly events: ReadonlyArray<CorralEvent>
}

/**
 * Runs agents under `TestClock`, moving virtual time forward until the run completes. Use it
 * inside `it.effect`. Every event is recorded and also passed to `options.onEvent`, if given. A run
 * that is not done after `options.limit` of virtual time (default 1 day) fails with `NotDone`.
 *
 * @since 0.1.0
 * @category running
 */
export const runScripted = <const Agents extends ReadonlyArray<Agent.Any>>(
  agents: Agents,
  options: Corral.Options & { readonly limit?: Duration.Input | undefined } = {}
): Effect.Effect<
  Recorded<Agent.Success<Agents[number]>, Agent.Failure<Agents[number]>>,
  InvalidRun | NotDone,
  Agent.Services<Agents[number]>
> =>
  Effect.gen(function* () {
    const { limit, onEvent, ...runOptions } = options
    const events: Array<CorralEvent> = []
    const record = (event: CorralEvent) => Effect.sync(() => events.push(event))
    const fiber = yield* Effect.forkChild(
      Corral.run(agents, {
        ...runOptions,
        onEvent: onEvent === undefined ? record : (event) => Effect.andThen(record(event), onEvent(event))
      }),
      { startImmediately: true }
    )
    yield* advanceUntilDone(fiber, "1 second", limit)
    const result = yield* Fiber.join(fiber)
    return { result, events }
  })

/**
 * `advanceUntilDone` moved the `TestClock` by its whole limit and the fiber is still running: it
 * waits for something virtual time cannot bring (`Effect.never`, a claim never released, a
 * `Deferred` nobody completes).
 *
 * @since 0.1.0
 * @category errors
 */
export class NotDone extends Data.TaggedError("NotDone")<{ readonly limit: Duration.Duration }> {
  override get message() {
    return `the fiber was still running after the TestClock moved ${Duration.format(this.limit)}: it waits for something virtual time cannot bring (Effect.never, a claim never released, a Deferred nobody completes); raise the limit if it really needs longer`
  }
}

/**
 * A `step` or `limit` that {@link advanceUntilDone} (or `runScripted`'s `limit`) cannot use: not a
 * duration, `NaN`, negative, or a `step` of 0 (which would never move the clock). The effect dies
 * with it. A {@link scripted} agent whose `duration` `DurationOption.millis` refuses dies with it
 * (`option: "duration"`) when it runs, without waiting.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidOption extends Data.TaggedError("InvalidOption")<{
  readonly option: "step" | "limit" | "duration"
  readonly reason: string
}> {
  override get message() {
    return `Testing.${this.option === "duration" ? "scripted" : "advanceUntilDone"} ${this.option}: ${this.reason}`
  }
}

const durationOption = (option: "step" | "limit", input: Duration.Input): Effect.Effect<number> => {
  const ms = millis(input)
  return Result.isFailure(ms)
    ? Effect.die(new InvalidOption({ option, reason: ms.failure }))
    : Effect.succeed(ms.success ?? 0)
}

/**
 * Moves the `TestClock` forward by `step` until the fiber is done, at most by `limit` (default
 * 1 day) in all; a fiber still running then fails the effect with `NotDone` (the fiber keeps
 * running; interrupt it, or let the test's scope do it).
 *
 * @since 0.1.0
 * @category running
 */
export const advanceUntilDone = <A, E>(
  fiber: Fiber.Fiber<A, E>,
  step: Duration.Input = "1 second",
  limit: Duration.Input = "1 day"
): Effect.Effect<void, NotDone> =>
  Effect.gen(function* () {
    const stepMs = yield* durationOption("step", step)
    if (stepMs === 0)
      return yield* Effect.die(new InvalidOption({ option: "step", reason: `must be a positive duration, got 0` }))
    const limitMs = yield* durationOption("limit", limit)
    const limitDuration = Duration.millis(limitMs)
    let left = limitMs
    yield* Effect.yieldNow
    while (fiber.pollUnsafe() === undefined) {
      if (left <= 0) return yield* new NotDone({ limit: limitDuration })
      yield* TestClock.adjust(Math.min(stepMs, left))
      left -= stepMs
      yield* Effect.yieldNow
    }
  })

/**
 * A violated invariant, with the event or interval that shows it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Violation {
  readonly invariant: string
  readonly detail: string
}

/**
 * Checks the invariants every run must keep: one terminal outcome per agent; at every event
 * `pending + running + done === total` and `running <= concurrency`; one `Finished` event per agent.
 *
 * @since 0.1.0
 * @category invariants
 */
export const checkRun = (
  agents: ReadonlyArray<Agent.Any>,
  recorded: Recorded<unknown, unknown>,
  concurrency: number
): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const ids = agents.map((agent) => agent.id)
  const outcomeIds = recorded.result.outcomes.map((outcome) => outcome?.agentId)
  if (JSON.stringify(ids) !== JSON.stringify(outcomeIds)) {
    violations.push({ invariant: "one outcome per agent, in input order", detail: `${outcomeIds.join(",")}` })
  }
  const finished = new Map<string, number>()
  for (const event of recorded.events) {
    const p = event.progress
    if (p.pending + p.running + p.done !== p.total || p.pending < 0 || p.running < 0) {
      violations.push({
        invariant: "pending + running + done === total",
        detail: `${event._tag}: ${JSON.stringify(p)}`
      })
    }
    if (p.running > concurrency)
      violations.push({ invariant: "running <= concurrency", detail: `${event._tag}: ${p.running}` })
    if (p.waiting > p.pending)
      violations.push({ invariant: "waiting <= pending", detail: `${event._tag}: ${JSON.stringify(p)}` })
    if (event._tag === "Finished") finished.set(event.agentId, (finished.get(event.agentId) ?? 0) + 1)
  }
  for (const id of ids) {
    if (finished.get(id) !== 1)
      violations.push({ invariant: "one Finished event per agent", detail: `${id}: ${finished.get(id) ?? 0}` })
  }
  return violations
}

/**
 * Checks a timeline: at no instant run more than `concurrency` agents, and no two agents whose
 * claims conflict overlap in time.
 *
 * @since 0.1.0
 * @category invariants
 */
export const checkTimeline = (timeline: Timeline, concurrency: number): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const points = timeline.intervals.flatMap((i) => [
    { at: i.start, delta: 1 },
    { at: i.end, delta: -1 }
  ])
  points.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let running = 0
  for (const point of points) {
    running += point.delta
    if (running > concurrency) violations.push({ invariant: "concurrency bound", detail: `${running} at ${point.at}` })
  }
  const requests = timeline.intervals.map((interval) => ({
    interval,
    request: interval.claims === undefined ? undefined : Claims.normalize({ ...interval.claims, pools: {} }, {})
  }))
  for (let i = 0; i < requests.length; i++) {
    for (let j = i + 1; j < requests.length; j++) {
      const a = requests[i]!
      const b = requests[j]!
      if (a.request?._tag !== "Success" || b.request?._tag !== "Success") continue
      const overlapInTime = a.interval.start < b.interval.end && b.interval.start < a.interval.end
      if (!overlapInTime) continue
      const keys = Claims.conflicts(a.request.success, b.request.success)
      if (keys.length > 0) {
        violations.push({
          invariant: "conflicting claims never held at once",
          detail: `${a.interval.agentId} and ${b.interval.agentId} on ${keys.join(", ")}`
        })
      }
    }
  }
  return violations
}

/**
 * The highest number of agents running at once in a timeline.
 *
 * @since 0.1.0
 * @category invariants
 */
export const peakConcurrency = (timeline: Timeline): number => {
  const points = timeline.intervals.flatMap((i) => [
    { at: i.start, delta: 1 },
    { at: i.end, delta: -1 }
  ])
  points.sort((a, b) => a.at - b.at || a.delta - b.delta)
  let running = 0
  let peak = 0
  for (const point of points) peak = Math.max(peak, (running += point.delta))
  return peak
}

/**
 * A retry policy for tests: `times` immediate retries.
 *
 * @since 0.1.0
 * @category constructors
 */
export const retries = (times: number): Schedule.Schedule<unknown, unknown> =>
  Schedule.recurs(times) as Schedule.Schedule<unknown, unknown>
