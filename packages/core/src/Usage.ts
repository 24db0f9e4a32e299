/**
 * Token and cost accounting. An agent reports what it spent with `Usage.report`; the run sums it
 * per agent and in total, and stops when a budget is exceeded.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

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
 * Where `report` sends usage: set by the run for each agent, absent outside a run.
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
 * Reports usage for the running agent. Outside a run it does nothing.
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
  Effect.flatMap(Reporter, (reporter) => (reporter === undefined ? Effect.void : Effect.sync(() => reporter(usage))))
