/**
 * The terminal outcome of one agent in a run. Every agent of a run gets exactly one.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"
import * as Usage from "./Usage.ts"

const common = {
  agentId: Schema.String,
  attempts: Schema.Number,
  queuedAt: Schema.Number,
  startedAt: Schema.NullOr(Schema.Number),
  endedAt: Schema.Number,
  waitedMs: Schema.Number,
  usage: Usage.Usage
}

/**
 * Fields every outcome has. Times are epoch milliseconds from the run's `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Common {
  readonly agentId: string
  readonly attempts: number
  readonly queuedAt: number
  readonly startedAt: number | null
  readonly endedAt: number
  readonly waitedMs: number
  readonly usage: Usage.Usage
}

/**
 * The agent finished with a value. `cached` marks a value taken from a ledger instead of a run.
 *
 * @since 0.1.0
 * @category models
 */
export class Succeeded extends Data.TaggedClass("Succeeded")<
  Common & { readonly value: unknown; readonly cached: boolean }
> {}

/**
 * The agent failed with a typed error, or died with a defect (`defect: true`): a thrown exception
 * or `Effect.die`.
 *
 * @since 0.1.0
 * @category models
 */
export class Failed extends Data.TaggedClass("Failed")<
  Common & { readonly error: unknown; readonly defect: boolean; readonly message: string }
> {}

/**
 * The agent ran longer than its timeout and was interrupted.
 *
 * @since 0.1.0
 * @category models
 */
export class TimedOut extends Data.TaggedClass("TimedOut")<Common & { readonly afterMs: number }> {}

/**
 * The agent was running when the run stopped (fail-fast, budget, `stopOn`, or the run itself
 * interrupted). `crossedBudget` is `true` for the one agent whose reported usage took the run over
 * its budget; its `reason` says so, while its interrupted siblings name it.
 *
 * @since 0.1.0
 * @category models
 */
export class Interrupted extends Data.TaggedClass("Interrupted")<
  Common & { readonly reason: string; readonly crossedBudget: boolean }
> {}

/**
 * The agent never started because the run stopped first.
 *
 * @since 0.1.0
 * @category models
 */
export class Cancelled extends Data.TaggedClass("Cancelled")<Common & { readonly reason: string }> {}

/**
 * The agent never started because a dependency did not succeed.
 *
 * @since 0.1.0
 * @category models
 */
export class Skipped extends Data.TaggedClass("Skipped")<
  Common & { readonly dependency: string; readonly dependencyOutcome: string }
> {}

/**
 * The agent waited longer than its claim timeout; `blockers` names the keys and their holders.
 *
 * @since 0.1.0
 * @category models
 */
export class ClaimTimedOut extends Data.TaggedClass("ClaimTimedOut")<
  Common & {
    readonly afterMs: number
    readonly blockers: ReadonlyArray<{ readonly key: string; readonly holder: string }>
  }
> {}

/**
 * The serialized form of any outcome (values and errors as they are; encode them to JSON yourself
 * when they are not JSON-safe). `fromEncoded` turns a decoded value back into an outcome class.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Encoded = Schema.Union([
  Schema.TaggedStruct("Succeeded", { ...common, value: Schema.Unknown, cached: Schema.Boolean }),
  Schema.TaggedStruct("Failed", { ...common, error: Schema.Unknown, defect: Schema.Boolean, message: Schema.String }),
  Schema.TaggedStruct("TimedOut", { ...common, afterMs: Schema.Number }),
  Schema.TaggedStruct("Interrupted", { ...common, reason: Schema.String, crossedBudget: Schema.Boolean }),
  Schema.TaggedStruct("Cancelled", { ...common, reason: Schema.String }),
  Schema.TaggedStruct("Skipped", { ...common, dependency: Schema.String, dependencyOutcome: Schema.String }),
  Schema.TaggedStruct("ClaimTimedOut", {
    ...common,
    afterMs: Schema.Number,
    blockers: Schema.Array(Schema.Struct({ key: Schema.String, holder: Schema.String }))
  })
])

/**
 * @since 0.1.0
 * @category schemas
 */
export type Encoded = typeof Encoded.Type

const classes = { Succeeded, Failed, TimedOut, Interrupted, Cancelled, Skipped, ClaimTimedOut } as const

/**
 * Rebuilds an outcome class from its decoded form.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEncoded = (encoded: Encoded): Outcome => {
  const { _tag, ...fields } = encoded
  return new classes[_tag](fields as never) as Outcome
}

/**
 * The same outcome with other usage (usage a fiber of the agent reported after the agent ended).
 *
 * @since 0.1.0
 * @category constructors
 */
export const withUsage = <O extends Outcome>(outcome: O, usage: Usage.Usage): O => {
  const { _tag, ...fields } = outcome as Outcome
  return new classes[_tag]({ ...fields, usage } as never) as unknown as O
}

/**
 * An outcome whose value and error are typed by the agent.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome<A = unknown, E = unknown> =
  | (Succeeded & { readonly value: A })
  | (Failed & { readonly defect: false; readonly error: E })
  | (Failed & { readonly defect: true; readonly error: unknown })
  | TimedOut
  | Interrupted
  | Cancelled
  | Skipped
  | ClaimTimedOut

/**
 * @since 0.1.0
 * @category models
 */
export type Tag = Outcome["_tag"]

/**
 * @since 0.1.0
 * @category guards
 */
export const isSucceeded = <A, E>(outcome: Outcome<A, E>): outcome is Succeeded & { readonly value: A } =>
  outcome._tag === "Succeeded"

/**
 * Outcomes that count as failures of the agent itself (not of the run around it).
 *
 * @since 0.1.0
 * @category guards
 */
export const isFailure = <A, E>(
  outcome: Outcome<A, E>
): outcome is Extract<Outcome<A, E>, { _tag: "Failed" | "TimedOut" | "ClaimTimedOut" }> =>
  outcome._tag === "Failed" || outcome._tag === "TimedOut" || outcome._tag === "ClaimTimedOut"
