/**
 * Token and cost accounting. An agent reports what it spent with `Usage.report`; the run sums it
 * per agent and in total, and stops when a budget is exceeded.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Agent from "./Agent.ts"

/**
 * Spent tokens and money.
 *
 * @since 0.1.0
 * @category models
 */
export const Usage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  costUsd: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export type Usage = typeof Usage.Type

/**
 * @since 0.1.0
 * @category constructors
 */
export const zero: Usage = { inputTokens: 0, outputTokens: 0, costUsd: 0 }

/**
 * @since 0.1.0
 * @category combinators
 */
export const add = (a: Usage, b: Partial<Usage>): Usage => ({
  inputTokens: a.inputTokens + (b.inputTokens ?? 0),
  outputTokens: a.outputTokens + (b.outputTokens ?? 0),
  costUsd: a.costUsd + (b.costUsd ?? 0)
})

/**
 * @since 0.1.0
 * @category combinators
 */
export const tokens = (usage: Usage): number => usage.inputTokens + usage.outputTokens

/**
 * Overrides where `report` sends usage (tests, custom accounting). When unset, usage goes to the
 * running agent bound by the run (`Agent.CurrentRef`).
 *
 * @since 0.1.0
 * @category references
 */
export const Reporter = Context.Reference<((usage: Partial<Usage>) => void) | undefined>(
  "@corral/core/Usage/Reporter",
  {
    defaultValue: () => undefined
  }
)

/**
 * Reports usage for the running agent; outside a run it does nothing. Each field given must be a
 * finite number of at least 0; a report with another value is dropped whole, with a warning naming
 * the agent and the field.
 *
 * The agent is the one that was running when the reporting fiber was forked, so usage reported by
 * a fiber an agent forked is credited to that agent, also after it ended: until the run ends it is
 * added to the agent's outcome and to the run's total (and can stop the run on its budget, naming
 * that agent). Usage reported after the run ended is dropped with a warning naming the agent. Usage
 * reported inside a run nested in an agent (`ToolCalls.run`) is credited to the nested agent and
 * also to the enclosing agent.
 *
 * @example
 * ```ts
 * import { Usage } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const call = Effect.gen(function*() {
 *   yield* Usage.report({ inputTokens: 1200, outputTokens: 300, costUsd: 0.004 })
 * })
 * ```
 * @since 0.1.0
 * @category reporting
 */
export const report = (usage: Partial<Usage>): Effect.Effect<void> =>
  Effect.flatMap(Reporter, (reporter) => {
    const problem = invalidField(usage)
    if (problem !== undefined) return dropInvalid(problem)
    return reporter !== undefined
      ? Effect.sync(() => reporter(usage))
      : Effect.flatMap(Agent.CurrentRef, (frame) => {
          if (frame === undefined || frame.report(usage)) return Effect.void
          const me = frame.current()
          return Effect.logWarning(
            `corral: usage reported by agent ${JSON.stringify(me.agentId)} after run ${me.runId} ended was dropped`,
            usage
          )
        })
  })

const fields = ["inputTokens", "outputTokens", "costUsd"] as const

/**
 * The first field of a report that is not a finite number of at least 0, described. Such a value
 * would poison the sums: `NaN` turns every total into `NaN` and disables the budget, a negative cost
 * lowers the spend, a string concatenates.
 */
const invalidField = (usage: Partial<Usage>): string | undefined => {
  for (const field of fields) {
    const value: unknown = usage[field]
    if (value === undefined || (typeof value === "number" && Number.isFinite(value) && value >= 0)) continue
    const shown = typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value))
    return `${field} must be a finite number of at least 0, got ${shown}`
  }
  return undefined
}

/** A report with an invalid field is dropped whole, with a warning naming the agent (when in one). */
const dropInvalid = (problem: string): Effect.Effect<void> =>
  Effect.flatMap(Agent.CurrentRef, (frame) => {
    const who = frame === undefined ? "" : ` by agent ${JSON.stringify(frame.current().agentId)}`
    return Effect.logWarning(`corral: usage reported${who} was dropped: ${problem}`)
  })
