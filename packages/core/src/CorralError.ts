/**
 * Errors of `Corral.run` itself (as opposed to the outcomes of its agents).
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"

/**
 * One problem found while validating a run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Issue {
  readonly agentId?: string | undefined
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
 * Renders an issue as `agent "id": field: message`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatIssue = (issue: Issue): string =>
  `  ${issue.agentId === undefined ? "" : `agent ${JSON.stringify(issue.agentId)}: `}${issue.field}: ${issue.message}`
