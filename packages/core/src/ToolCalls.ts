/**
 * Runs a batch of tool calls the way a careful agent loop should: every call declares what it
 * reads and writes, so read-only calls run concurrently and calls that write the same resource run
 * one after the other — through the same lock layer and scheduler as agents, not a second mechanism.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Agent from "./Agent.ts"
import type * as Claims from "./Claims.ts"
import * as Corral from "./Corral.ts"
import { InvalidRun, type Issue } from "./CorralError.ts"
import { describe } from "./internal/describe.ts"
import type * as Outcome from "./Outcome.ts"

/**
 * One tool call: `read` and `write` name the resources it touches (paths or `scheme:name` keys).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCall<A, E, R> {
  readonly name: string
  readonly read?: ReadonlyArray<string> | undefined
  readonly write?: ReadonlyArray<string> | undefined
  readonly run: Effect.Effect<A, E, R>
}

/**
 * Runs the calls (at most `concurrency` at once, 8 by default) and returns one outcome per call,
 * in order. Calls are named `<index>:<name>` so the same tool may be called twice.
 *
 * Inside an agent, calls on keys the agent holds run without waiting for it; calls on other keys
 * wait for their holders, for at most `claimTimeout` when it is given (then the call ends
 * `ClaimTimedOut` naming the holders, and the other calls go on). On the in-memory lock layer a call
 * without `claimTimeout` whose wait would close a cycle (two agents each calling a tool on a key the
 * other holds) makes the run die with `CorralError.ClaimDeadlock` naming the cycle, and the other
 * agents of the cycle go on; cycles the README's Claims section lists as not detected wait until the
 * agents' `timeout` ends one of them. Calls with a `claimTimeout` are neither checked nor counted as
 * waiting, since their wait ends by itself; a call wrapped in `Effect.timeout` instead still counts
 * as waiting: a cycle through it is reported although the timeout would have ended it.
 *
 * @example
 * ```ts
 * import { ToolCalls } from "@corral/core"
 * import { Effect } from "effect"
 *
 * declare const readFile: (path: string) => Effect.Effect<string>
 * declare const search: (pattern: string) => Effect.Effect<string>
 * declare const writeFile: (path: string, text: string) => Effect.Effect<string>
 *
 * const program = Effect.gen(function*() {
 *   const outcomes = yield* ToolCalls.run([
 *     { name: "read_file", read: ["src/a.ts"], run: readFile("src/a.ts") },
 *     { name: "search", read: ["src/"], run: search("parse") },
 *     { name: "write_file", write: ["src/a.ts"], run: writeFile("src/a.ts", "text") }
 *   ])
 *   return outcomes.map((outcome) => outcome._tag)
 * })
 * ```
 * @since 0.1.0
 * @category running
 */
export const run = <A, E, R>(
  calls: ReadonlyArray<ToolCall<A, E, R>>,
  options: RunOptions = {}
): Effect.Effect<ReadonlyArray<Outcome.Outcome<A, E>>, InvalidRun, R> => {
  const issues = shapeIssues(calls)
  if (issues !== undefined) return Effect.fail(new InvalidRun({ issues }))
  return Effect.map(
    Corral.run(
      calls.map((call, i) => Agent.make(`${i}:${call.name}`, { run: call.run, claims: claimsOf(call) })),
      { concurrency: options.concurrency ?? 8, claimTimeout: options.claimTimeout }
    ),
    (result) => result.outcomes
  )
}

/**
 * Options of `run`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  /** Most calls running at once. Default 8. */
  readonly concurrency?: number | undefined
  /**
   * Longest wait of a call for its keys; a call that waits longer does not run and ends
   * `ClaimTimedOut`, naming the keys and their holders. Default: no bound. A value the run refuses
   * (not a duration, negative) is an `InvalidRun` naming `claimTimeout`.
   */
  readonly claimTimeout?: Duration.Input | undefined
}

/** What an untyped caller got wrong in the list itself (each call's fields are checked by the run). */
const shapeIssues = (calls: unknown): ReadonlyArray<Issue> | undefined => {
  if (!Array.isArray(calls)) {
    return [{ field: "calls", message: `expected an array of tool calls, got ${describe(calls)}` }]
  }
  let issues: Array<Issue> | undefined
  for (let index = 0; index < calls.length; index++) {
    const call: unknown = calls[index]
    if (typeof call === "object" && call !== null && !Array.isArray(call)) continue
    const message = `expected a tool call { name, read, write, run }, got ${describe(call)}`
    ;(issues ??= []).push({ field: `calls[${index}]`, message })
  }
  return issues
}

const claimsOf = (call: ToolCall<unknown, unknown, unknown>): Claims.Claims => ({ read: call.read, write: call.write })
