/**
 * Errors of `Corral.run` itself (as opposed to the outcomes of its agents).
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type { Holder } from "./ResourceLocks.ts"

/**
 * One problem found while validating a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Issue {
  /** The agent at fault, when it has an id. */
  readonly agentId?: string | undefined
  /** The agent's position in the list given to `Corral.run`, for every problem of one agent. */
  readonly index?: number | undefined
  /** The option at fault: a run option (`concurrency`, `pools.gpu`) or a field of the agent (`timeout`, `claims.write[0]`). */
  readonly field: string
  readonly message: string
}

/**
 * The agents or options of a run are invalid; nothing was started. `issues` lists every problem.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRun extends Data.TaggedError("InvalidRun")<{ readonly issues: ReadonlyArray<Issue> }> {
  override get message() {
    return `invalid run:\n${this.issues.map(formatIssue).join("\n")}`
  }
}

/**
 * An agent's `run` function returned something other than an effect (an `async` function's
 * `Promise`, a plain value), or `run` is an object that is not an effect. The agent ends `Failed`
 * with this as its defect; the run goes on. (`run` as a plain value or a `Promise` is an
 * `InvalidRun` before anything starts.)
 *
 * @since 0.1.0
 * @category errors
 */
export class NotAnEffect extends Data.TaggedError("NotAnEffect")<{
  readonly agentId: string
  /** What `run` returned or is: `a Promise`, `number`, `object`, ... */
  readonly got: string
  /** `true` when a `run` function returned it, `false` when it is `run` itself. */
  readonly returned: boolean
}> {
  override get message() {
    const hint = this.got === "a Promise" ? " (wrap a promise with Effect.promise or Effect.tryPromise)" : ""
    return `agent ${JSON.stringify(this.agentId)}: run ${this.returned ? "returned" : "is"} ${this.got}, not an effect${hint}`
  }
}

/**
 * A run nested inside an agent (`Corral.run`, `ToolCalls.run`) asked the in-memory lock layer for
 * a key whose holder waits, through runs nested inside it, for a key held by an agent around the
 * request: the agents of `cycle` would wait for each other for ever. Found when the request is
 * about to wait; the nested run dies with this error (so the agent around it ends `Failed`,
 * `defect: true`, and releases its keys), and the other agents of the cycle go on waiting and
 * proceed once it has. A nested agent with a `claimTimeout` is neither checked nor followed: its
 * wait ends by itself. Not detected: cycles through pools, through agents of one run waiting for
 * each other, through `ResourceLocks.acquire` called by your own code, or on a lock layer other
 * than the in-memory one.
 *
 * @since 0.1.0
 * @category errors
 */
export class ClaimDeadlock extends Data.TaggedError("ClaimDeadlock")<{
  /** The nested agent whose claim would have closed the cycle. */
  readonly agent: Holder
  /** Each agent of the cycle, the key it waits for and that key's holder, the next agent. */
  readonly cycle: ReadonlyArray<{ readonly waiter: Holder; readonly key: string; readonly holder: Holder }>
}> {
  override get message() {
    const steps = this.cycle.map((step, i) => {
      const waits = `waits for ${JSON.stringify(step.key)} held by ${formatHolder(step.holder)}`
      return i === 0 ? `${formatHolder(step.waiter)} ${waits}` : `which ${waits}`
    })
    return `claim deadlock: ${steps.join(", ")}; ${formatHolder(this.agent)} would close the cycle, so its run fails`
  }
}

const formatHolder = (holder: Holder): string =>
  `agent ${JSON.stringify(holder.agentId)}${holder.runId === "" ? "" : ` (run ${holder.runId})`}`

/**
 * Renders an issue as `agent "id" (agents[i]): field: message`, `agents[i]: field: message` for an
 * agent without a usable id, or `field: message` for a run option.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatIssue = (issue: Issue): string => {
  const at = issue.index === undefined ? undefined : `agents[${issue.index}]`
  const agent =
    issue.agentId === undefined ? at : `agent ${JSON.stringify(issue.agentId)}${at === undefined ? "" : ` (${at})`}`
  return `  ${[agent, issue.field === "" ? undefined : issue.field, issue.message].filter((part) => part !== undefined).join(": ")}`
}
