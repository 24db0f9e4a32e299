/**
 * The terminal outcome of one agent in a run. Every agent of a run gets exactly one.
 *
 * @since 0.1.0
 */
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
 * The agent finished with a value. `cached` marks a value taken from a ledger instead of a run.
 *
 * @since 0.1.0
 * @category models
 */
export class Succeeded extends Schema.TaggedClass<Succeeded>()("Succeeded", {
  ...common,
  value: Schema.Unknown,
  cached: Schema.Boolean
}) {}

/**
 * The agent failed with a typed error, or died with a defect (`defect: true`): a thrown exception
 * or `Effect.die`.
 *
 * @since 0.1.0
 * @category models
 */
export class Failed extends Schema.TaggedClass<Failed>()("Failed", {
  ...common,
  error: Schema.Unknown,
  defect: Schema.Boolean,
  message: Schema.String
}) {}

/**
 * The agent ran longer than its timeout and was interrupted.
 *
 * @since 0.1.0
 * @category models
 */
export class TimedOut extends Schema.TaggedClass<TimedOut>()("TimedOut", {
  ...common,
  afterMs: Schema.Number
}) {}

/**
 * The agent was running when the run stopped (fail-fast, budget, or the run itself interrupted).
 *
 * @since 0.1.0
 * @category models
 */
export class Interrupted extends Schema.TaggedClass<Interrupted>()("Interrupted", {
  ...common,
  reason: Schema.String
}) {}

/**
 * The agent never started because the run stopped first.
 *
 * @since 0.1.0
 * @category models
 */
export class Cancelled extends Schema.TaggedClass<Cancelled>()("Cancelled", {
  ...common,
  reason: Schema.String
}) {}

/**
 * The agent never started because a dependency did not succeed.
 *
 * @since 0.1.0
 * @category models
 */
export class Skipped extends Schema.TaggedClass<Skipped>()("Skipped", {
  ...common,
  dependency: Schema.String,
  dependencyOutcome: Schema.String
}) {}

/**
 * The agent waited longer than its claim timeout; `blockers` names the keys and their holders.
 *
 * @since 0.1.0
 * @category models
 */
export class ClaimTimedOut extends Schema.TaggedClass<ClaimTimedOut>()("ClaimTimedOut", {
  ...common,
  afterMs: Schema.Number,
  blockers: Schema.Array(Schema.Struct({ key: Schema.String, holder: Schema.String }))
}) {}

/**
 * Every outcome, untyped: the form that is stored and sent.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Outcome = Schema.Union([Succeeded, Failed, TimedOut, Interrupted, Cancelled, Skipped, ClaimTimedOut])

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
export const isFailure = <A, E>(outcome: Outcome<A, E>): outcome is Extract<Outcome<A, E>, { _tag: "Failed" | "TimedOut" | "ClaimTimedOut" }> =>
  outcome._tag === "Failed" || outcome._tag === "TimedOut" || outcome._tag === "ClaimTimedOut"
