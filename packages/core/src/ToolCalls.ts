/**
 * Runs a batch of tool calls the way a careful agent loop should: every call declares what it
 * reads and writes, so read-only calls run concurrently and calls that write the same resource run
 * one after the other — through the same lock layer and scheduler as agents, not a second mechanism.
 *
 * @since 0.1.0
 */
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
 * wait for their holders, with no bound of their own. On the in-memory lock layer a call whose wait
 * would close a cycle (two agents each calling a tool on a key the other holds) makes the run die
 * with `CorralError.ClaimDeadlock` naming the cycle, and the other agents of the cycle go on; cycles
 * the README's Claims section lists as not detected wait until the agents' `timeout` ends one of
 * them. A call wrapped in `Effect.timeout` still counts as waiting: a cycle through it is reported
 * although the timeout would have ended it.
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
  options: { readonly concurrency?: number | undefined } = {}
): Effect.Effect<ReadonlyArray<Outcome.Outcome<A, E>>, InvalidRun, R> => {
  const issues = shapeIssues(calls)
  if (issues !== undefined) return Effect.fail(new InvalidRun({ issues }))
  return Effect.map(
    Corral.run(
      calls.map((call, i) => Agent.make(`${i}:${call.name}`, { run: call.run, claims: claimsOf(call) })),
      { concurrency: options.concurrency ?? 8 }
    ),
    (result) => result.outcomes
  )
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
