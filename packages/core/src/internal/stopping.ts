/**
 * Why and when a run stops before every agent ran: fail-fast, a budget, `stopOn`. The first request
 * wins (the runner then interrupts its workers). Also the texts outcomes give as reason.
 */
import type { StopReason } from "../CorralEvent.ts"
import * as Usage from "../Usage.ts"

export type Budget = { readonly costUsd?: number | undefined; readonly tokens?: number | undefined }

export class Stopping<Agent> {
  reason: StopReason | undefined = undefined
  /** The agent whose reported usage crossed the budget. */
  crossing: Agent | undefined = undefined

  /** Records the stop; `false` when the run was already stopping. */
  request(reason: StopReason): boolean {
    if (this.reason !== undefined) return false
    this.reason = reason
    return true
  }

  /** Why agents that were stopped did not finish. */
  text(): string {
    const stopped = this.reason
    if (stopped === undefined) return "the run was interrupted"
    switch (stopped._tag) {
      case "AgentFailed":
        return `the run stopped after agent ${JSON.stringify(stopped.agentId)} ended ${stopped.outcome}`
      case "BudgetExceeded":
        return `the run stopped: ${stopped.limit} budget of ${stopped.budget} exceeded (${stopped.spent}) by agent ${JSON.stringify(stopped.agentId)}`
      case "Stopped":
        return `the run was stopped: ${stopped.reason}`
    }
  }

  /** The reason given to the agent that crossed the budget. */
  crossedText(): string {
    const stopped = this.reason as Extract<StopReason, { _tag: "BudgetExceeded" }>
    return `this agent's usage crossed the ${stopped.limit} budget of ${stopped.budget} (${stopped.spent} spent in the run), so the run stopped`
  }
}

/** The budget stop for `spent`, if it passes a limit. */
export const overBudget = (agentId: string, spent: Usage.Usage, budget: Budget): StopReason | undefined => {
  if (budget.costUsd !== undefined && spent.costUsd > budget.costUsd) {
    return { _tag: "BudgetExceeded", agentId, limit: "costUsd", spent: spent.costUsd, budget: budget.costUsd }
  }
  const tokens = Usage.tokens(spent)
  if (budget.tokens !== undefined && tokens > budget.tokens) {
    return { _tag: "BudgetExceeded", agentId, limit: "tokens", spent: tokens, budget: budget.tokens }
  }
  return undefined
}
