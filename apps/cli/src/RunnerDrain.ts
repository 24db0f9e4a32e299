/**
 * After a cluster run was stopped (or failed and cancelled its other agents), the coordinator waits
 * until its runners ended every execution it had sent them, so the prompt comes back with the run's
 * work stopped everywhere: an execution has ended when its `Execute` message is answered
 * (`processed` in `cluster_messages`, which the runner sets once the handler, its process and
 * workspace clean-up included, is done) and its execution lease is gone from `corral_executions`.
 * The wait is bounded (a runner that is dead, stopped or cut off may never answer), a second stop
 * request ends it at once, and so does a poll the database does not answer (nothing to wait on:
 * the runners cannot report either); the agents still running at the last look are named.
 *
 * @since 0.1.0
 */
import * as AgentEntity from "@corral/cluster/AgentEntity"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

/**
 * How long a coordinator waits for its runners after a stop.
 *
 * @since 0.1.0
 * @category constants
 */
export const bound: Duration.Duration = Duration.seconds(10)

/**
 * How the wait ended: every execution ended, the bound passed, a second stop request skipped it, or
 * the database did not answer; `agents` are those whose executions were still running at the last look.
 *
 * @since 0.1.0
 * @category models
 */
export type Drained =
  | { readonly _tag: "Ended" }
  | { readonly _tag: "TimedOut" | "Skipped"; readonly agents: ReadonlyArray<string> }
  | { readonly _tag: "Unknown"; readonly agents: ReadonlyArray<string>; readonly reason: string }

/**
 * Which agents of the run: their ids, label, and the earlier runs whose executions the run adopted.
 *
 * @since 0.1.0
 * @category models
 */
export interface Target {
  readonly runId: string
  readonly agents: ReadonlyArray<{ readonly id: string; readonly requires: string | undefined }>
  readonly adopted: ReadonlyMap<string, ReadonlyArray<string>>
}

const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

const placedSuffix = /~\d+(?:#[^#~]+)?$/

/** `kind` of a request row in `cluster_messages` (effect's `SqlMessageStorage`: 0 request, 1 ack, 2 interrupt). */
const requestKind = 0

/**
 * The agents of `target` with an execution not ended yet: an unanswered `Execute` message or an
 * execution lease, of the run itself or of an execution it adopted.
 *
 * effect never deletes processed messages, but the message query is served by effect's own index
 * `cluster_messages_shard_idx (shard_id, processed, …)`: PostgreSQL scans it with `processed = false`
 * as its index condition and reads only the few unprocessed rows (measured against a real
 * PostgreSQL with processed `Execute` rows of old runs: 200k rows, 302 index pages, 0.26–0.48 ms in
 * the server; 1M rows, 902 pages, 0.9 ms; a poll of both queries 0.9–1.7 ms median from the client).
 * The leases alone would not do: an `Execute` message stored but not yet taken up by a runner's
 * handler has no lease yet (the handler takes it when it starts).
 *
 * @since 0.1.0
 * @category queries
 */
export const running = (
  sql: SqlClient.SqlClient,
  target: Target
): Effect.Effect<ReadonlyArray<string>, SqlError.SqlError> =>
  Effect.gen(function* () {
    const bases = new Map<string, string>()
    const leases = new Map<string, string>()
    for (const agent of target.agents) {
      for (const runId of [target.runId, ...(target.adopted.get(agent.id) ?? [])]) {
        bases.set(`${runId}/${agent.id}`, agent.id)
        leases.set(AgentEntity.entityId(runId, agent.id, agent.requires), agent.id)
      }
    }
    const adopted = [...target.adopted].flatMap(([agentId, runs]) => runs.map((runId) => `${runId}/${agentId}`))
    const messagePatterns = [`${likeEscape(target.runId)}/%`, ...adopted.map((base) => `${likeEscape(base)}~%`)]
    const leasePatterns = [`${likeEscape(target.runId)}/%`, ...adopted.map((base) => `${likeEscape(base)}%`)]
    const messages = yield* sql<{ entity_id: string }>`SELECT DISTINCT entity_id FROM cluster_messages
      WHERE entity_type = ${AgentEntity.AgentEntity.type} AND kind = ${requestKind} AND processed = FALSE
      AND ${sql.or(messagePatterns.map((pattern) => sql`entity_id LIKE ${pattern}`))}`
    const held = yield* sql<{ entity: string }>`SELECT entity FROM corral_executions
      WHERE ${sql.or(leasePatterns.map((pattern) => sql`entity LIKE ${pattern}`))}`
    const agents = new Set<string>()
    for (const row of messages) {
      const agent = bases.get(row.entity_id.replace(placedSuffix, ""))
      if (agent !== undefined) agents.add(agent)
    }
    for (const row of held) {
      const agent = leases.get(row.entity)
      if (agent !== undefined) agents.add(agent)
    }
    return [...agents].sort()
  })

/**
 * Polls `running` every `every` until it is empty, for at most `within`; `skip` (a second stop
 * request) ends the wait at once, as does a failed poll; `slow` is told the agents still running
 * once `slowAfter` passed.
 *
 * @since 0.1.0
 * @category waiting
 */
export const wait = <E extends { readonly message: string }, R>(options: {
  readonly running: Effect.Effect<ReadonlyArray<string>, E, R>
  readonly within: Duration.Input
  readonly every: Duration.Input
  readonly skip: Effect.Effect<void>
  readonly slowAfter: Duration.Input
  readonly slow: (agents: ReadonlyArray<string>) => void
}): Effect.Effect<Drained, never, R> =>
  Effect.suspend(() => {
    let left: ReadonlyArray<string> = []
    const look = Effect.map(options.running, (agents) => {
      left = agents
      return agents.length === 0
    })
    const ended = Effect.repeat(look, { until: (done) => done, schedule: Schedule.spaced(options.every) }).pipe(
      Effect.as<Drained>({ _tag: "Ended" }),
      Effect.catch((error) => Effect.succeed<Drained>({ _tag: "Unknown", agents: left, reason: error.message }))
    )
    const tell = Effect.andThen(
      Effect.sleep(options.slowAfter),
      Effect.sync(() => options.slow(left))
    )
    const timedOut = Effect.andThen(
      Effect.sleep(options.within),
      Effect.sync((): Drained => ({ _tag: "TimedOut", agents: left }))
    )
    const skipped = Effect.andThen(
      options.skip,
      Effect.sync((): Drained => ({ _tag: "Skipped", agents: left }))
    )
    return Effect.raceFirst(Effect.andThen(Effect.forkScoped(tell), ended), Effect.raceFirst(timedOut, skipped)).pipe(
      Effect.scoped
    )
  })
