/**
 * After a cluster run was stopped (or failed and cancelled its other agents), the coordinator waits
 * until its runners ended every execution it had sent them, so the prompt comes back with the run's
 * work stopped everywhere: an execution has ended when its `Execute` message is answered
 * (`processed` in `cluster_messages`, which the runner sets once the handler, its process and
 * workspace clean-up included, is done) and its execution lease is gone from `corral_executions`.
 * The wait is bounded (a runner that is dead, stopped or cut off may never answer), a second stop
 * request ends it at once, and so does a poll the database does not answer (nothing to wait on:
 * the runners cannot report either); the agents still running at the last look are named, each with
 * its runner from `corral_runners`: the runner whose lease owner number (`lease_owner`) is the
 * owner of the agent's execution lease, else, for an agent whose message no runner took up yet, the
 * runner that holds its message's shard (as the placement reads it).
 *
 * @since 0.1.0
 */
import * as AgentEntity from "@corral/cluster/AgentEntity"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"
import * as RunnerNames from "./RunnerNames.ts"

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
export type Drained<A = Running> =
  | { readonly _tag: "Ended" }
  | { readonly _tag: "TimedOut" | "Skipped"; readonly agents: ReadonlyArray<A> }
  | { readonly _tag: "Unknown"; readonly agents: ReadonlyArray<A>; readonly reason: string }

/**
 * An agent whose execution has not ended, and the address of its runner: the one whose registry row
 * records its execution lease's owner, else the one holding its `Execute` message's shard
 * (`undefined` when no registered runner is either).
 *
 * @since 0.1.0
 * @category models
 */
export interface Running {
  readonly agent: string
  readonly runner: string | undefined
}

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

/** Runners by shard (`<group>:<n>` as effect writes `shard_id`) and by execution lease owner number. */
interface Owners {
  readonly shards: Map<string, string>
  readonly leases: Map<number, string>
}

/**
 * Each shard's and each lease owner's runner, the freshest registration winning as in the
 * placement; a stale row counts too (a stopped runner still holds its shards and leases until its
 * lock and their TTL expire). Empty when the registry cannot be read: the names are a help, not the answer.
 */
const owners = (sql: SqlClient.SqlClient): Effect.Effect<Owners> =>
  sql<{ address: string; shards: string; lease_owner: number | null }>`SELECT address, shards, lease_owner
    FROM corral_runners ORDER BY heartbeat_at`.pipe(
    Effect.map((rows) => {
      const found: Owners = { shards: new Map(), leases: new Map() }
      for (const row of rows) {
        const shards = JSON.parse(row.shards) as Record<string, ReadonlyArray<number>>
        for (const [group, numbers] of Object.entries(shards)) {
          for (const shard of numbers) found.shards.set(`${group}:${shard}`, row.address)
        }
        if (row.lease_owner !== null) found.leases.set(Number(row.lease_owner), row.address)
      }
      return found
    }),
    Effect.orElseSucceed((): Owners => ({ shards: new Map(), leases: new Map() }))
  )

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
 * handler has no lease yet (the handler takes it when it starts). The runner registry is read only
 * when something is still running.
 *
 * @since 0.1.0
 * @category queries
 */
export const running = (
  sql: SqlClient.SqlClient,
  target: Target
): Effect.Effect<ReadonlyArray<Running>, SqlError.SqlError> =>
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
    const messages = yield* sql<{ entity_id: string; shard_id: string }>`SELECT DISTINCT entity_id, shard_id
      FROM cluster_messages
      WHERE entity_type = ${AgentEntity.AgentEntity.type} AND kind = ${requestKind} AND processed = FALSE
      AND ${sql.or(messagePatterns.map((pattern) => sql`entity_id LIKE ${pattern}`))}`
    const held = yield* sql<{ entity: string; owner_id: number }>`SELECT entity, owner_id FROM corral_executions
      WHERE ${sql.or(leasePatterns.map((pattern) => sql`entity LIKE ${pattern}`))}`
    const where = new Map<string, { shard?: string; owner?: number }>()
    for (const row of messages) {
      const agent = bases.get(row.entity_id.replace(placedSuffix, ""))
      if (agent !== undefined) where.set(agent, { shard: row.shard_id })
    }
    for (const row of held) {
      const agent = leases.get(row.entity)
      if (agent !== undefined) where.set(agent, { ...where.get(agent), owner: Number(row.owner_id) })
    }
    if (where.size === 0) return []
    const found = yield* owners(sql)
    return [...where]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([agent, { shard, owner }]) => ({
        agent,
        runner:
          (owner === undefined ? undefined : found.leases.get(owner)) ??
          (shard === undefined ? undefined : found.shards.get(shard))
      }))
  })

/**
 * The agents by runner (`RunnerNames.byRunner`).
 *
 * @since 0.1.0
 * @category formatting
 */
export const byRunner = RunnerNames.byRunner

/**
 * Where the agents may still be running (`RunnerNames.whereRunning`).
 *
 * @since 0.1.0
 * @category formatting
 */
export const whereRunning = RunnerNames.whereRunning

/**
 * Polls `running` every `every` until it is empty, for at most `within`; `skip` (a second stop
 * request) ends the wait at once, as does a failed poll; `slow` is told the agents still running
 * once `slowAfter` passed.
 *
 * @since 0.1.0
 * @category waiting
 */
export const wait = <A, E extends { readonly message: string }, R>(options: {
  readonly running: Effect.Effect<ReadonlyArray<A>, E, R>
  readonly within: Duration.Input
  readonly every: Duration.Input
  readonly skip: Effect.Effect<void>
  readonly slowAfter: Duration.Input
  readonly slow: (agents: ReadonlyArray<A>) => void
}): Effect.Effect<Drained<A>, never, R> =>
  Effect.suspend(() => {
    let left: ReadonlyArray<A> = []
    const look = Effect.map(options.running, (agents) => {
      left = agents
      return agents.length === 0
    })
    const ended = Effect.repeat(look, { until: (done) => done, schedule: Schedule.spaced(options.every) }).pipe(
      Effect.as<Drained<A>>({ _tag: "Ended" }),
      Effect.catch((error) => Effect.succeed<Drained<A>>({ _tag: "Unknown", agents: left, reason: error.message }))
    )
    const tell = Effect.andThen(
      Effect.sleep(options.slowAfter),
      Effect.sync(() => options.slow(left))
    )
    const timedOut = Effect.andThen(
      Effect.sleep(options.within),
      Effect.sync((): Drained<A> => ({ _tag: "TimedOut", agents: left }))
    )
    const skipped = Effect.andThen(
      options.skip,
      Effect.sync((): Drained<A> => ({ _tag: "Skipped", agents: left }))
    )
    return Effect.raceFirst(Effect.andThen(Effect.forkScoped(tell), ended), Effect.raceFirst(timedOut, skipped)).pipe(
      Effect.scoped
    )
  })
