/**
 * What happened in a run: one outcome per agent, in input order, and figures derived from them.
 *
 * @since 0.1.0
 */
import { Class as PipeableClass } from "effect/Pipeable"
import type { StopReason } from "./CorralEvent.ts"
import * as Outcome from "./Outcome.ts"
import * as Usage from "./Usage.ts"

/**
 * @example
 * ```ts
 * import { Agent, Corral } from "@corral/core"
 * import { Effect } from "effect"
 *
 * const agents = [Agent.make("a", { run: Effect.succeed(1) }), Agent.make("b", { run: Effect.fail("no") })]
 * const program = Effect.gen(function*() {
 *   const result = yield* Corral.run(agents, { concurrency: 4 })
 *   if (!result.allSucceeded) console.log(result.failed.map((o) => o.agentId))
 * })
 * ```
 * @since 0.1.0
 * @category models
 */
export class RunResult<A = unknown, E = unknown> extends PipeableClass {
  readonly runId: string
  readonly outcomes: ReadonlyArray<Outcome.Outcome<A, E>>
  readonly startedAt: number
  readonly endedAt: number
  readonly stopped: StopReason | undefined

  constructor(options: {
    readonly runId: string
    readonly outcomes: ReadonlyArray<Outcome.Outcome<A, E>>
    readonly startedAt: number
    readonly endedAt: number
    readonly stopped: StopReason | undefined
  }) {
    super()
    this.runId = options.runId
    this.outcomes = options.outcomes
    this.startedAt = options.startedAt
    this.endedAt = options.endedAt
    this.stopped = options.stopped
  }

  /** The outcome of one agent. */
  get(agentId: string): Outcome.Outcome<A, E> | undefined {
    return this.outcomes.find((outcome) => outcome.agentId === agentId)
  }

  get succeeded(): ReadonlyArray<Outcome.Succeeded & { readonly value: A }> {
    return this.outcomes.filter(Outcome.isSucceeded)
  }

  get failed(): ReadonlyArray<Outcome.Outcome<A, E>> {
    return this.outcomes.filter(Outcome.isFailure)
  }

  /** Whether every outcome is `Succeeded` (`true` for a run of no agents). */
  get allSucceeded(): boolean {
    const outcomes = this.outcomes
    for (let index = 0; index < outcomes.length; index++) if (outcomes[index]!._tag !== "Succeeded") return false
    return true
  }

  get wallMs(): number {
    return this.endedAt - this.startedAt
  }

  get usage(): Usage.Usage {
    return this.outcomes.reduce((sum, outcome) => Usage.add(sum, outcome.usage), Usage.zero)
  }

  /** Outcome counts by tag. */
  get counts(): Readonly<Partial<Record<Outcome.Tag, number>>> {
    const counts: Partial<Record<Outcome.Tag, number>> = {}
    for (const outcome of this.outcomes) counts[outcome._tag] = (counts[outcome._tag] ?? 0) + 1
    return counts
  }
}
