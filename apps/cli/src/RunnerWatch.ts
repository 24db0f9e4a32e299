/**
 * What a cluster run says when agents it sent out have no runner to run them. effect's sharding
 * keeps such an agent's message, persisted, until a runner takes its shard, and says nothing: a run
 * whose runners all died waited without a word. Every 5 s the coordinator reads the runners alive
 * (`RunnerRegistry.list`: a heartbeat within 10 s; the table's migrations are checked only until a
 * read succeeds) and finds the running agents (started, not finished) that none of them can run:
 * none is alive, or none has the label the agent requires. An agent found so on two checks in a row
 * (a runner's heartbeat can lag just after a database outage) is named once; when a runner for it is
 * alive again, that is said too.
 *
 * @since 0.1.0
 */
import { RunnerRegistry } from "@corral/cluster"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * @since 0.1.0
 * @category models
 */
export interface RunnerWatch {
  /** Follows the run's events: `Started` and `Finished` tell which agents are running. */
  readonly onEvent: (event: { readonly _tag: string; readonly agentId?: string }) => void
  /** Checks every 5 s until interrupted; a failed read of the registry is skipped. */
  readonly run: Effect.Effect<never, never, SqlClient.SqlClient>
}

const canRun = (runner: RunnerRegistry.RunnerInfo, requires: string | undefined): boolean =>
  requires === undefined || runner.labels.includes(requires)

const agentsWait = (ids: ReadonlyArray<string>) =>
  ids.length === 1 ? `agent ${ids[0]} waits` : `agents ${ids.join(", ")} wait`

/** The agents by the label they require (`""` for none), in the order given. */
const byLabel = (ids: ReadonlyArray<string>, requiresOf: ReadonlyMap<string, string | undefined>) => {
  const groups = new Map<string, Array<string>>()
  for (const id of ids) {
    const label = requiresOf.get(id) ?? ""
    groups.set(label, [...(groups.get(label) ?? []), id])
  }
  return groups
}

/**
 * A watch over the agents of `requiresOf` (agent id → the label it requires); `note` prints a line
 * and `start` is the command that starts a runner, for the hint.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  requiresOf: ReadonlyMap<string, string | undefined>,
  start: string,
  note: (message: string) => void
): RunnerWatch => {
  const running = new Set<string>()
  const suspect = new Set<string>()
  const said = new Set<string>()
  const onEvent = (event: { readonly _tag: string; readonly agentId?: string }) => {
    const id = event.agentId
    if (id === undefined) return
    if (event._tag === "Started") running.add(id)
    else if (event._tag === "Finished") {
      running.delete(id)
      suspect.delete(id)
      said.delete(id)
    }
  }
  const check = (alive: ReadonlyArray<RunnerRegistry.RunnerInfo>) => {
    const stranded = new Set([...running].filter((id) => !alive.some((r) => canRun(r, requiresOf.get(id)))))
    const waiting = [...stranded].filter((id) => suspect.has(id) && !said.has(id))
    for (const [label, ids] of byLabel(waiting, requiresOf)) {
      const who = label === "" ? "no runner is alive" : `no runner with label ${label} is alive`
      note(`${who}: ${agentsWait(ids)} for one (start one with ${start}; Ctrl-C stops the run)`)
      for (const id of ids) said.add(id)
    }
    const back = [...said].filter((id) => !stranded.has(id))
    if (back.length > 0) {
      const they = back.length === 1 ? "it continues" : "they continue"
      note(`a runner is alive again for ${back.length === 1 ? "agent" : "agents"} ${back.join(", ")}; ${they}`)
      for (const id of back) said.delete(id)
    }
    suspect.clear()
    for (const id of stranded) suspect.add(id)
  }
  let migrated = false
  const probe = Effect.suspend(() => RunnerRegistry.list(10_000, { migrate: !migrated })).pipe(
    Effect.flatMap((alive) =>
      Effect.sync(() => {
        migrated = true
        check(alive)
      })
    ),
    Effect.catch(() => Effect.void)
  )
  return { onEvent, run: Effect.forever(Effect.andThen(Effect.sleep("5 seconds"), probe)) }
}
