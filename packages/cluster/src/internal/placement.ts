/**
 * Load-aware placement: which entity id a coordinator sends an agent's attempt to, so that it lands
 * on a runner with a free slot.
 *
 * `effect/cluster` routes a message by its entity id alone (a hash of the id picks one of the
 * group's shards, the shard's owner runs it) and offers no way to address a runner. So the
 * coordinator learns which runner holds which shard (runners publish their shards, capacity and
 * labels in `corral_runners`, see `RunnerRegistry`), chooses the eligible runner with the most free
 * slots, and picks the first salt `n` for which `<runId>/<agentId>~<n>` hashes to one of that
 * runner's hot shards (its {@link hotShards} lowest-numbered shards in the group; any of its shards
 * when no salt within `maxSalt` does). Everything effect guarantees for an entity stays as it was:
 * the message is persisted before it is sent, and when its runner dies the shard's next owner runs it.
 *
 * Why hot shards: a runner confirms its shard's lock before it stores a reply (`effect/cluster`,
 * two statements on its lock connection), and replies of one shard arriving while a confirmation
 * runs share it. Spread over every shard, nearly each reply paid its own; on a few shards, bursts of
 * replies share one. The price: a dead runner's running attempts move with at most that many shards.
 *
 * The view is a hint: when it is stale (a runner just joined or died) an attempt lands on the shard's
 * real owner, whose capacity still bounds what it runs at once (the rest wait in its mailbox).
 *
 * Load is what this coordinator has in flight: counted per shard from send to reply, and summed per
 * runner under the current view, so an attempt whose shard moved (its runner died) counts on the new
 * owner. Another coordinator's agents on the same runners are not counted.
 *
 * States of an attempt: `waiting` (every eligible runner is full: it waits for a reply or a new view)
 * → `placed` (counted on its shard) → released when its send ends, however it ends. An attempt whose
 * group has no runner in the view is sent to salt 0 uncounted (its message waits, persisted, for a
 * runner to take the group).
 */

/** A runner as the placement sees it. */
export interface RunnerView {
  readonly address: string
  readonly capacity: number
  /** Shards held, by shard group. */
  readonly shards: Readonly<Record<string, ReadonlyArray<number>>>
}

/** Where an attempt was placed; `release` it when its send ends. */
export interface Ticket {
  readonly entityId: string
  /** The runner chosen, `undefined` when the group had none in the view (sent uncounted). */
  readonly runner: string | undefined
  /** The shard key counted, `undefined` when uncounted. */
  readonly shard: string | undefined
}

/** How many salts to try before giving up on a runner (each try is one string hash). */
const maxSalt = 4096

/** How many of a runner's shards in a group its attempts are placed on (its lowest-numbered). */
export const hotShards = 4

/** Each runner's `count` lowest-numbered shards per group, keyed `<runner>\0<group>`. */
const hotOf = (owners: ReadonlyMap<string, string>, count: number): Map<string, ReadonlySet<number>> => {
  const held = new Map<string, Array<number>>()
  for (const [shard, owner] of owners) {
    const at = shard.lastIndexOf(":")
    const key = `${owner}\u0000${shard.slice(0, at)}`
    const list = held.get(key) ?? []
    list.push(Number(shard.slice(at + 1)))
    held.set(key, list)
  }
  const hot = new Map<string, ReadonlySet<number>>()
  for (const [key, shards] of held) hot.set(key, new Set(shards.sort((a, b) => a - b).slice(0, count)))
  return hot
}

/**
 * The placement state. Synchronous and free of effects, so that the policy is tested
 * deterministically; `Cluster` drives it (view refreshes, waiting, releases).
 */
export class Placement {
  private owners = new Map<string, string>()
  private capacity = new Map<string, number>()
  private byGroup = new Map<string, Array<string>>()
  private readonly inFlight = new Map<string, number>()
  private load = new Map<string, number>()
  private hot = new Map<string, ReadonlySet<number>>()

  private readonly shardOf: (entityId: string, group: string) => number
  private readonly hotCount: number

  /**
   * @param shardOf the shard number of an entity id in a group (`Sharding.getShardId`)
   * @param hot how many of a runner's shards (its lowest in the group) attempts are placed on
   */
  constructor(shardOf: (entityId: string, group: string) => number, hot = hotShards) {
    this.shardOf = shardOf
    this.hotCount = hot
  }

  /** Replaces the view; a shard listed by several runners goes to the last listed (the freshest). */
  setView(runners: ReadonlyArray<RunnerView>): void {
    const owners = new Map<string, string>()
    const capacity = new Map<string, number>()
    for (const runner of runners) {
      capacity.set(runner.address, runner.capacity)
      for (const [group, shards] of Object.entries(runner.shards))
        for (const shard of shards) owners.set(`${group}:${shard}`, runner.address)
    }
    this.hot = hotOf(owners, this.hotCount)
    const byGroup = new Map<string, Set<string>>()
    for (const [shard, owner] of owners) {
      const group = shard.slice(0, shard.lastIndexOf(":"))
      const set = byGroup.get(group) ?? new Set<string>()
      set.add(owner)
      byGroup.set(group, set)
    }
    this.owners = owners
    this.capacity = capacity
    this.byGroup = new Map([...byGroup].map(([group, set]) => [group, [...set].sort()]))
    const load = new Map<string, number>()
    for (const [shard, count] of this.inFlight) {
      const owner = owners.get(shard)
      if (owner !== undefined) load.set(owner, (load.get(owner) ?? 0) + count)
    }
    this.load = load
  }

  /** Runners holding shards of `group` in the view. */
  eligible(group: string): ReadonlyArray<string> {
    return this.byGroup.get(group) ?? []
  }

  /** Free slots of a runner under this coordinator's load. */
  free(runner: string): number {
    return (this.capacity.get(runner) ?? 0) - (this.load.get(runner) ?? 0)
  }

  /** Free slots of the runners eligible for `group`. */
  available(group: string): number {
    let free = 0
    for (const runner of this.eligible(group)) free += Math.max(0, this.free(runner))
    return free
  }

  /**
   * Places an attempt whose entity ids are `entityIdOf(salt)` in `group`: on the eligible runner
   * with the most free slots (ties by address). `"full"` when every eligible runner is full.
   */
  tryPlace(group: string, entityIdOf: (salt: number) => string): Ticket | "full" {
    const runners = this.eligible(group)
    if (runners.length === 0) return { entityId: entityIdOf(0), runner: undefined, shard: undefined }
    const ranked = runners.filter((r) => this.free(r) > 0).sort((a, b) => this.free(b) - this.free(a))
    if (ranked.length === 0) return "full"
    for (const runner of ranked) {
      const hot = this.hot.get(`${runner}\u0000${group}`)
      let fallback: { readonly entityId: string; readonly shard: string } | undefined
      for (let salt = 0; salt < maxSalt; salt++) {
        const entityId = entityIdOf(salt)
        const n = this.shardOf(entityId, group)
        if (hot?.has(n) === true) return this.count(runner, entityId, `${group}:${n}`)
        if (fallback !== undefined) continue
        const shard = `${group}:${n}`
        if (this.owners.get(shard) === runner) fallback = { entityId, shard }
      }
      if (fallback !== undefined) return this.count(runner, fallback.entityId, fallback.shard)
    }
    return { entityId: entityIdOf(0), runner: undefined, shard: undefined }
  }

  private count(runner: string, entityId: string, shard: string): Ticket {
    this.inFlight.set(shard, (this.inFlight.get(shard) ?? 0) + 1)
    this.load.set(runner, (this.load.get(runner) ?? 0) + 1)
    return { entityId, runner, shard }
  }

  /** Ends a ticket's count. */
  release(ticket: Ticket): void {
    if (ticket.shard === undefined) return
    const count = (this.inFlight.get(ticket.shard) ?? 0) - 1
    if (count > 0) this.inFlight.set(ticket.shard, count)
    else this.inFlight.delete(ticket.shard)
    const owner = this.owners.get(ticket.shard)
    if (owner !== undefined) this.load.set(owner, Math.max(0, (this.load.get(owner) ?? 0) - 1))
  }
}
