/**
 * The lifecycle of one agent in a run, and the run's progress counters.
 *
 * ```text
 *                    deps done (runner)
 *  waiting-deps ────────────────────────────► ready ◄────────────┐
 *       │                                    │ │ │               │ blockers released (claim gate)
 *       │ dependency failed: Skipped         │ │ │ blocked       │ rate token free (rate waits)
 *       │ run stopped: Cancelled             │ │ └──────────► parked
 *       ▼                                    │ │                 │
 *      done ◄────────────────────────────────┘ │                 │ ClaimTimedOut (claim timer)
 *       ▲   cached (ledger), ClaimTimedOut,    │ start            │ run stopped: Cancelled
 *       │   run stopped: Cancelled             ▼                 │
 *       └──────────────────────────────── running                │
 *       ▲   agent exited: its outcome;                           │
 *       │   granted after the stop: Cancelled                    │
 *       └────────────────────────────────────────────────────────┘
 * ```
 *
 * | from         | to      | when                                              | by                  |
 * | ------------ | ------- | ------------------------------------------------- | ------------------- |
 * | waiting-deps | ready   | its last dependency succeeded (roots: at start)   | runner              |
 * | waiting-deps | done    | `Skipped` (a dependency failed), `Cancelled`      | runner              |
 * | ready        | running | it holds a slot, its token and its claims         | worker, claim gate  |
 * | ready        | parked  | its claims or its rate-limit token are not free   | claim gate, worker  |
 * | ready        | done    | ledger hit, `ClaimTimedOut`, `Cancelled`          | worker, timer, stop |
 * | parked       | ready   | every lease that blocked it was released / token  | claim gate, rate    |
 * | parked       | done    | `ClaimTimedOut`, `Cancelled`                      | timer, stop         |
 * | running      | done    | the agent's exit classified; `Cancelled` when it  | worker, stop        |
 * |              |         | was granted after the run stopped                 |                     |
 *
 * A `running` agent that gave its concurrency slot back (`Corral.releaseSlot`) stays `running` until
 * it ends; only the runner's slot accounting (`released`, `retakers` in `runner.ts`) tells it apart.
 *
 * Every move goes through `Lifecycle.move`, which rejects any other move as a defect and keeps one
 * counter per state, so `pending + running + done === total` holds by construction (`pending` is
 * `waiting-deps + ready + parked`; `waiting` is `parked`).
 */
import type { Progress } from "../CorralEvent.ts"
import type * as Outcome from "../Outcome.ts"

export type NodeState = "waiting-deps" | "ready" | "parked" | "running" | "done"

/** The table above, as code (a switch: cheaper than keyed lookups on the per-agent path). */
export const isLegal = (from: NodeState, to: NodeState): boolean => {
  switch (from) {
    case "waiting-deps":
      return to === "ready" || to === "done"
    case "ready":
      return to === "running" || to === "parked" || to === "done"
    case "parked":
      return to === "ready" || to === "done"
    case "running":
      return to === "done"
    case "done":
      return false
  }
}

export interface Stateful {
  state: NodeState
  readonly id: string
  /** Told that the node ended while it waited for claims (`parked` or `ready`), without running. */
  readonly stoppedWaiting?: () => void
}

export class Lifecycle {
  readonly total: number
  waitingDeps: number
  ready = 0
  parked = 0
  running = 0
  done = 0
  readonly outcomes: Record<Outcome.Tag, number> = {
    Succeeded: 0,
    Failed: 0,
    TimedOut: 0,
    Interrupted: 0,
    Cancelled: 0,
    Skipped: 0,
    ClaimTimedOut: 0
  }

  constructor(total: number) {
    this.total = total
    this.waitingDeps = total
  }

  /** Moves a node to `to`; any move the table does not allow is a defect in the scheduler. */
  move(node: Stateful, to: NodeState): void {
    const from = node.state
    if (!isLegal(from, to)) {
      throw new Error(`corral: illegal lifecycle move of agent ${JSON.stringify(node.id)} from ${from} to ${to}`)
    }
    this.count(from, -1)
    this.count(to, 1)
    node.state = to
  }

  /**
   * Counts `n` nodes that the caller moved from `waiting-deps` to `ready` itself: the roots of a
   * run, set before it starts, in the same pass that binds them to the run.
   */
  seeded(n: number): void {
    this.waitingDeps -= n
    this.ready += n
  }

  /**
   * `move(node, "running")` for a node the caller took from the ready queue: the one legal move
   * from `ready` it makes, without the table's general dispatch (every agent makes it).
   */
  start(node: Stateful): void {
    if (node.state !== "ready") {
      this.move(node, "running")
      return
    }
    this.ready--
    this.running++
    node.state = "running"
  }

  /** `finish(node, "Succeeded")` for a `running` node (every agent that succeeds makes it). */
  succeeded(node: Stateful): void {
    if (node.state !== "running") {
      this.finish(node, "Succeeded")
      return
    }
    this.running--
    this.done++
    this.outcomes.Succeeded++
    node.state = "done"
  }

  /** Moves a node to `done` with its outcome's tag counted. */
  finish(node: Stateful, tag: Outcome.Tag): void {
    const from = node.state
    this.move(node, "done")
    this.outcomes[tag]++
    if (from === "parked" || from === "ready") node.stoppedWaiting?.()
  }

  get allDone(): boolean {
    return this.done === this.total
  }

  /** No node waits to run (for dependencies, a worker, claims or a token): only running ones are left. */
  get nonePending(): boolean {
    return this.waitingDeps + this.ready + this.parked === 0
  }

  progress(): Progress {
    const outcomes = this.outcomes
    return {
      total: this.total,
      pending: this.waitingDeps + this.ready + this.parked,
      waiting: this.parked,
      running: this.running,
      done: this.done,
      succeeded: outcomes.Succeeded,
      failed: outcomes.Failed + outcomes.ClaimTimedOut,
      timedOut: outcomes.TimedOut,
      interrupted: outcomes.Interrupted,
      cancelled: outcomes.Cancelled,
      skipped: outcomes.Skipped
    }
  }

  private count(state: NodeState, delta: number): void {
    switch (state) {
      case "waiting-deps":
        this.waitingDeps += delta
        return
      case "ready":
        this.ready += delta
        return
      case "parked":
        this.parked += delta
        return
      case "running":
        this.running += delta
        return
      case "done":
        this.done += delta
    }
  }
}
