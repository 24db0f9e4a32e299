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
 * The fields of every outcome, by tag: the one definition both the classes and `Encoded` are
 * derived from, so they cannot drift apart.
 */
const fields = {
  Succeeded: { ...common, value: Schema.Unknown, cached: Schema.Boolean },
  Failed: { ...common, error: Schema.Unknown, defect: Schema.Boolean, message: Schema.String },
  TimedOut: { ...common, afterMs: Schema.Number },
  Interrupted: { ...common, reason: Schema.String, crossedBudget: Schema.Boolean },
  Cancelled: { ...common, reason: Schema.String },
  Skipped: { ...common, dependency: Schema.String, dependencyOutcome: Schema.String },
  ClaimTimedOut: {
    ...common,
    afterMs: Schema.Number,
    blockers: Schema.Array(Schema.Struct({ key: Schema.String, holder: Schema.String }))
  }
}

type Fields<Tag extends keyof typeof fields> = Schema.Struct.Type<(typeof fields)[Tag]>

/**
 * Fields every outcome has. Times are epoch milliseconds from the run's `Clock`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Common extends Schema.Struct.Type<typeof common> {}

/**
 * The agent finished with a value. `cached` marks a value taken from a ledger instead of a run.
 *
 * @since 0.1.0
 * @category models
 */
export class Succeeded extends Data.TaggedClass("Succeeded")<Fields<"Succeeded">> {}

/**
 * The agent failed with a typed error, or died with a defect (`defect: true`): a thrown exception
 * or `Effect.die`.
 *
 * @since 0.1.0
 * @category models
 */
export class Failed extends Data.TaggedClass("Failed")<Fields<"Failed">> {}

/**
 * The agent ran longer than its timeout and was interrupted.
 *
 * @since 0.1.0
 * @category models
 */
export class TimedOut extends Data.TaggedClass("TimedOut")<Fields<"TimedOut">> {}

/**
 * The agent was running when the run stopped (fail-fast, budget, `stopOn`, or the run itself
 * interrupted). `crossedBudget` is `true` for the one agent whose reported usage took the run over
 * its budget; its `reason` says so, while its interrupted siblings name it.
 *
 * @since 0.1.0
 * @category models
 */
export class Interrupted extends Data.TaggedClass("Interrupted")<Fields<"Interrupted">> {}

/**
 * The agent never started because the run stopped first.
 *
 * @since 0.1.0
 * @category models
 */
export class Cancelled extends Data.TaggedClass("Cancelled")<Fields<"Cancelled">> {}

/**
 * The agent never started because a dependency did not succeed.
 *
 * @since 0.1.0
 * @category models
 */
export class Skipped extends Data.TaggedClass("Skipped")<Fields<"Skipped">> {}

/**
 * The agent waited longer than its claim timeout; `blockers` names the keys and their holders.
 *
 * @since 0.1.0
 * @category models
 */
export class ClaimTimedOut extends Data.TaggedClass("ClaimTimedOut")<Fields<"ClaimTimedOut">> {}

/**
 * The serialized form of any outcome (values and errors as they are; encode them to JSON yourself
 * when they are not JSON-safe). `fromEncoded` turns a decoded value back into an outcome class.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Encoded = Schema.Union([
  Schema.TaggedStruct("Succeeded", fields.Succeeded),
  Schema.TaggedStruct("Failed", fields.Failed),
  Schema.TaggedStruct("TimedOut", fields.TimedOut),
  Schema.TaggedStruct("Interrupted", fields.Interrupted),
  Schema.TaggedStruct("Cancelled", fields.Cancelled),
  Schema.TaggedStruct("Skipped", fields.Skipped),
  Schema.TaggedStruct("ClaimTimedOut", fields.ClaimTimedOut)
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
