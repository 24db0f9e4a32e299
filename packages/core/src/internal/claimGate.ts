import * as Effect from "effect/Effect"
import * as Claims from "../Claims.ts"
import type * as ResourceLocks from "../ResourceLocks.ts"
import { type HolderList, type Hit, KeyTree } from "./keyTree.ts"
import { type LockTable, memoryTables } from "./lockTable.ts"
import { before, type Node, waitOf } from "./node.ts"

export interface GateHost {
  readonly runId: string
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly maxBypass: number
  readonly observing: boolean
  readonly makeReady: (node: Node) => void
  readonly wake: () => void
  /** Moves the node to `parked`; `changed` when its blockers differ from the last time. */
  readonly parked: (node: Node, changed: boolean) => void
  readonly granted: (node: Node, lease: ResourceLocks.Lease) => void
}

interface PoolUse {
  used: number
  readonly holders: Set<Node>
}

/**
 * Decides when an agent with claims may start. Its own view of the run's leases (`held`, `pools`)
 * answers most checks synchronously; only a locally free request is sent to the lock service, which
 * also sees other runs and processes. A parked agent is woken only when every lease that blocked it
 * is released and it can start (see `wakeFreed`); in a run nobody observes, the holders of its keys
 * in the run are not leases it waits for but a count kept by key (`counts`, see `passOver`
 * and `letGo`). Agents queued behind it may overtake it at most `maxBypass` times on each of its
 * keys (see `bypass`).
 */
export class ClaimGate {
  private readonly held = new KeyTree<Node>()
  private readonly pools = new Map<string, PoolUse>()
  private readonly intents = new KeyTree<Node>()
  private readonly reserved = new KeyTree<Node>()
  /**
   * The agents parked on each lease (`parkedOn`) and on each agent's reserved token (`followers`,
   * by the agent's index: a run parks ≈ 5 agents per agent on reserved tokens, and a `Map` entry
   * each came and went with a rehash now and then); an agent may be listed more than once (see
   * `visit`).
   */
  private readonly parkedOn = new Map<number, Array<Node>>()
  private readonly followers: Array<Array<Node> | undefined> = []
  /**
   * In a run nobody observes, by agent index: how many conflicting claim pairs agents holding keys
   * in the run's view have with a parked agent, kept by key as they take and let go of them (see
   * `passOver`, `letGo`); -1 while it is not counted so. An array, not a field of the agent's
   * `WaitState`: the walks over a key's waiters read it for every waiter (≈ 158k reads and as many
   * writes a 2,000-agent claims run), and the agent's `Extra` and `WaitState` were two more
   * dependent loads each time.
   */
  private readonly counts: Array<number> = []
  private visits = 0
  private batches = 0
  private releaseEpoch = 0
  private grants = 0
  /**
   * `heldConflicts`' tally, the agent whose keys `letGo` or `passOver` walk the waiters of (not
   * one of them) and `passOver`'s grant mark (fields: no closure per walk).
   */
  private hits = 0
  private subject: Node | undefined = undefined
  private takeMark = 0
  /**
   * The agents one release freed (`freed`, its first `freedCount`), then `wakeFreed`'s scratch lists:
   * the agents it woke, the last of each one's queue, the key each queue writes (their first
   * `wokenCount`). Kept by the gate and reset by count, because `length = 0` frees an array's
   * backing store (a new one per release, ≈ 0.2 µs and its garbage). `batching` while a batch uses them.
   */
  private readonly freed: Array<Node> = []
  private freedCount = 0
  private readonly woken: Array<Node> = []
  private readonly tails: Array<Node> = []
  private readonly chains: Array<string | undefined> = []
  private wokenCount = 0
  private batching = false
  private readonly host: GateHost
  /** The table of an in-memory lock service: leases are taken and released synchronously (`acquireNow`, `releaseNow`). */
  readonly table: LockTable | undefined

  constructor(host: GateHost) {
    this.host = host
    this.table = memoryTables.get(host.locks)
  }

  check(node: Node): boolean {
    const request = node.request!
    const reserved = this.reservedAhead(node, request)
    if (reserved !== undefined) {
      this.park(node, [reservedToken(reserved)], () => this.reservedBy(node, reserved))
      return false
    }
    if (this.host.observing) {
      const tokens = this.localTokens(request)
      if (tokens.length === 0) {
        this.hold(node, request)
        return true
      }
      this.park(node, tokens, undefined)
      return false
    }
    const count = this.heldConflicts(request)
    const tokens = this.poolTokens(request)
    if (count === 0 && tokens.length === 0) {
      this.hold(node, request)
      return true
    }
    this.park(node, tokens, undefined, count)
    return false
  }

  /** How many conflicting claim pairs the agents holding keys in the run's view have with `request`. */
  private heldConflicts(request: Claims.Request): number {
    if (this.held.size === 0 || request.keys.length === 0) return 0
    this.hits = 0
    this.held.eachConflictSet(request.keys, this.countHits)
    return this.hits
  }

  private readonly countHits = (holders: HolderList<Node>): void => {
    this.hits += holders.size
  }

  /** The leases (or reserved tokens) in this run that block `request`, added to `tokens` (empty). */
  private localTokens(request: Claims.Request, tokens: Array<number> = []): Array<number> {
    if (this.held.size > 0) this.held.eachConflict(request.keys, (holder) => addToken(tokens, holderToken(holder)))
    return this.poolTokens(request, tokens)
  }

  /** The leases (or reserved tokens) in this run that hold a pool `request` does not fit in, added to `tokens`. */
  private poolTokens(request: Claims.Request, tokens: Array<number> = []): Array<number> {
    for (const claim of request.pools) {
      const use = this.pools.get(claim.pool)
      if (use !== undefined && use.used + claim.amount > claim.capacity) {
        for (const holder of use.holders) addToken(tokens, holderToken(holder))
      }
    }
    return tokens
  }

  acquire(node: Node): Effect.Effect<boolean> {
    const holder = { runId: this.host.runId, agentId: node.id }
    const attempt = (): Effect.Effect<boolean> => {
      const epoch = this.releaseEpoch
      return Effect.flatMap(this.host.locks.tryAcquire(holder, node.request!), (result) => {
        if (node.state !== "ready") {
          this.unhold(node)
          return result._tag === "Acquired"
            ? Effect.as(this.host.locks.release(result.lease), false)
            : Effect.succeed(false)
        }
        if (result._tag === "Acquired") {
          this.grant(node, result.lease)
          return Effect.succeed(true)
        }
        if (this.releaseEpoch !== epoch) return attempt()
        this.unhold(node)
        this.park(node, serviceTokens(result.blockers), () => result.blockers)
        return Effect.succeed(false)
      })
    }
    return Effect.uninterruptible(Effect.suspend(attempt))
  }

  /**
   * `acquire` on an in-memory lock service (`table`), in one synchronous step: whether `node`, which
   * `check` let hold its claims in the run's view, was granted its lease.
   */
  acquireNow(node: Node): boolean {
    const result = this.table!.tryAcquire({ runId: this.host.runId, agentId: node.id }, node.request!)
    if (result._tag === "Acquired") {
      this.grant(node, result.lease)
      return true
    }
    this.unhold(node)
    this.park(node, serviceTokens(result.blockers), () => result.blockers)
    return false
  }

  /**
   * Releases a running agent's lease: `detach`, then the lock service's release (`releaseNow` on an
   * in-memory one).
   */
  release(node: Node, lease: ResourceLocks.Lease): Effect.Effect<void> {
    this.detach(node)
    if (this.table !== undefined) return Effect.sync(() => this.releaseNow(node, lease))
    if (this.host.observing) return this.host.locks.release(lease)
    return Effect.ensuring(
      this.host.locks.release(lease),
      Effect.sync(() => this.releaseKeys(node))
    )
  }

  /**
   * The first step of a release: the node has no lease any longer and its pools leave the run's
   * view (whose waiters wait for the lease, see `poolTokens`). In a run nobody observes its keys
   * leave the run's view only once the lock service has released them (`releaseNow`), so an agent
   * woken by key (see `letGo`) finds them free there too; in an observed run they leave now.
   */
  detach(node: Node): void {
    node.lease = undefined
    if (this.host.observing) this.releaseLocal(node)
    else this.releasePools(node)
  }

  /** The rest of a release after `detach`, on an in-memory lock service (`table`), synchronously. */
  releaseNow(node: Node, lease: ResourceLocks.Lease): void {
    if (this.host.observing) {
      this.table!.release(lease)
      return
    }
    try {
      this.table!.release(lease)
    } finally {
      this.releaseKeys(node)
    }
  }

  private releaseLocal(node: Node): void {
    this.releasePools(node)
    this.releaseKeys(node)
  }

  private releasePools(node: Node): void {
    for (const claim of node.request!.pools) {
      const use = this.pools.get(claim.pool)
      if (use === undefined) continue
      use.used -= claim.amount
      use.holders.delete(node)
    }
  }

  private releaseKeys(node: Node): void {
    const request = node.request!
    this.held.remove(node, request.keys)
    if (!this.host.observing && this.intents.size > 0 && request.keys.length > 0) this.letGo(node, request)
  }

  /**
   * `node` let go of its keys in the run's view: each parked agent counted by key (`counts`)
   * loses its conflicts with it, and one left with none and no token to wait for is woken now.
   */
  private letGo(node: Node, request: Claims.Request): void {
    this.startBatch()
    this.subject = node
    this.intents.eachConflictSet(request.keys, this.uncountAll)
    this.subject = undefined
    this.wakeFreed()
  }

  /** `letGo`'s step for the waiters of one key: a loop here, not a call per waiter from the tree. */
  private readonly uncountAll = (waiters: HolderList<Node>): void => {
    const items = waiters.items
    const node = this.subject
    const counts = this.counts
    for (let i = 0; i < waiters.size; i++) {
      const other = items[i]!
      const count = counts[other.index]!
      if (count > 0 && other !== node && other.state === "parked") {
        counts[other.index] = count - 1
        if (count === 1 && (other.wait!.blockingTokens?.length ?? 0) === 0) this.freed[this.freedCount++] = other
      }
    }
  }

  onRelease(token: number): void {
    if (token > 0) this.releaseEpoch++
    const set = this.takeWaiters(token)
    if (set === undefined) return
    this.startBatch()
    const visit = ++this.visits
    for (let i = 0; i < set.length; i++) {
      const node = set[i]!
      if (!firstVisit(node, visit)) continue
      const blocking = node.wait?.blockingTokens
      if (blocking !== undefined && blocking.length > 0) deleteToken(blocking, token)
      if (node.state === "parked" && (blocking?.length ?? 0) === 0 && this.heldFree(node))
        this.freed[this.freedCount++] = node
    }
    this.wakeFreed()
  }

  /** Starts collecting the agents a release frees into `freed`; a batch never starts inside another. */
  private startBatch(): void {
    if (this.batching) throw new Error("ClaimGate: a release inside a wake batch")
    this.batching = true
    this.freedCount = 0
  }

  /**
   * Wakes parked agents whose last blocker went away, best first. In a run nobody observes, one
   * whose keys conflict with an agent woken before it would only find that agent holding them: it
   * waits instead (parked on a reserved token, which passes to the lease when it is granted) and is
   * not queued or checked again. The agents behind one woken agent that write one key it writes too
   * form a queue in priority order, each following the one before it (any two of them conflict), so a
   * release hands a hot key to its best waiter and looks at that waiter only, not at every agent
   * waiting for the key. One
   * that stays parked on what holds its other keys lets its own followers be checked at once (they
   * may start without it), so a waiter whose keys are all free never waits behind one that cannot
   * start.
   */
  private wakeFreed(): void {
    const freed = this.freed
    if (this.freedCount === 0) {
      this.batching = false
      return
    }
    if (!sorted(freed, this.freedCount)) sortByPriority(freed, this.freedCount)
    const woken = this.woken
    const tails = this.tails
    const chains = this.chains
    this.wokenCount = 0
    let wake = false
    const batch = ++this.batches
    for (let i = 0; i < this.freedCount; i++) {
      const node = freed[i]!
      const request = node.request!
      if (request.keys.length > 0 && !this.host.observing) {
        const wait = node.wait!
        // Examined once per batch: a release can free an agent both by key and by token.
        if (wait.batchMark === batch) continue
        wait.batchMark = batch
        const count = this.counts[node.index]! >= 0 ? 0 : this.heldConflicts(request)
        const ahead = conflicting(request, woken, this.wokenCount)
        if (ahead >= 0) {
          const first = woken[ahead]!
          const key = (chains[ahead] ??= sharedWrite(request, first.request!))
          const joins = key !== "" && writes(request, key)
          this.parkAgain(node, undefined, reservedToken(joins ? tails[ahead]! : first), count)
          if (joins) tails[ahead] = node
          if (!wait.reserved) this.freeFollowers(node, i)
          continue
        }
        const tokens = this.poolTokens(request, wait.blockingTokens)
        if (count > 0 || tokens.length > 0) {
          this.parkAgain(node, tokens, 0, count)
          if (!wait.reserved) this.freeFollowers(node, i)
          continue
        }
        this.counts[node.index] = -1
        const at = this.wokenCount++
        woken[at] = node
        tails[at] = node
        chains[at] = undefined
      }
      this.host.makeReady(node)
      wake = true
    }
    this.batching = false
    if (wake) this.host.wake()
  }

  /**
   * Adds the agents that followed `node` and wait for nothing else to `freed`, after index `at`, in
   * priority order, unless this batch freed them already (by key): `freed` after `at` is in priority
   * order, so such an agent stands just before where it would go, or was examined.
   */
  private freeFollowers(node: Node, at: number): void {
    const freed = this.freed
    const token = reservedToken(node)
    const set = this.takeWaiters(token)
    if (set === undefined) return
    const visit = ++this.visits
    for (let i = 0; i < set.length; i++) {
      const other = set[i]!
      if (!firstVisit(other, visit)) continue
      const blocking = other.wait?.blockingTokens
      if (blocking !== undefined && blocking.length > 0) deleteToken(blocking, token)
      if (other.state !== "parked" || (blocking?.length ?? 0) > 0 || !this.heldFree(other)) continue
      let j = this.freedCount
      while (j > at + 1 && before(other, freed[j - 1]!)) j--
      if (freed[j - 1] === other || other.wait!.batchMark === this.batches) continue
      for (let k = this.freedCount++; k > j; k--) freed[k] = freed[k - 1]!
      freed[j] = other
    }
  }

  /**
   * Keeps a parked node parked on `tokens` (or, with none, following the agent whose reserved token
   * is `follow`) and, in a run nobody observes, on `count` conflicts with holders of its keys.
   */
  private parkAgain(node: Node, tokens: Array<number> | undefined, follow: number, count: number): void {
    const wait = node.wait!
    wait.blockingTokens = tokens
    this.setCount(node, count)
    wait.describeBlockers = undefined
    if (tokens === undefined) {
      this.addWaiter(follow, node)
      return
    }
    for (const token of tokens) this.addWaiter(token, node)
  }

  /**
   * `node` was granted its lease. Every agent parked on its reserved token (it held their keys or
   * pool while its grant was in flight, it was reserved ahead of them, or they follow it) is
   * blocked by that lease now, so in a run nobody observes they wait for it without a check.
   */
  private handOver(node: Node, lease: ResourceLocks.Lease): void {
    const from = reservedToken(node)
    if (this.host.observing) {
      this.onRelease(from)
      return
    }
    const set = this.takeWaiters(from)
    if (set === undefined) return
    for (let i = 0; i < set.length; i++) {
      const blocking = set[i]!.wait?.blockingTokens
      if (blocking !== undefined && deleteToken(blocking, from)) addToken(blocking, lease.id)
    }
    const existing = this.parkedOn.get(lease.id)
    if (existing === undefined) this.parkedOn.set(lease.id, set)
    else for (let i = 0; i < set.length; i++) existing.push(set[i]!)
  }

  dropIntent(node: Node): void {
    const wait = node.wait
    if (wait === undefined || !wait.intent) return
    wait.intent = false
    this.intents.remove(node, node.request!.keys)
    if (wait.reserved) this.reserved.remove(node, node.request!.keys)
    this.onRelease(reservedToken(node))
  }

  /**
   * Drops the claim wait of an agent that ended and waits for nothing (`dropIntent` ran): a walk
   * that still meets it in a list of waiters finds it not parked. Its waiting state would otherwise
   * live, and be copied by the young-generation collector, until the run returns.
   */
  forget(node: Node): void {
    if (!node.wait!.intent) node.wait = undefined
  }

  private hold(node: Node, request: Claims.Request): void {
    this.held.add(node, request.keys)
    for (const claim of request.pools) {
      let use = this.pools.get(claim.pool)
      if (use === undefined) this.pools.set(claim.pool, (use = { used: 0, holders: new Set() }))
      use.used += claim.amount
      use.holders.add(node)
    }
    if (!this.host.observing && this.intents.size > 0 && request.keys.length > 0) this.passOver(node, request)
  }

  private unhold(node: Node): void {
    this.releaseLocal(node)
    this.onRelease(reservedToken(node))
  }

  private grant(node: Node, lease: ResourceLocks.Lease): void {
    node.lease = lease
    node.fencingToken = lease.fencingToken
    const request = node.request!
    this.handOver(node, lease)
    this.dropIntent(node)
    if (this.host.observing && this.intents.size > 0) this.passOver(node, request)
    this.host.granted(node, lease)
  }

  /** Parks a `ready` node on the tokens that block it; the host moves it to `parked`. */
  /** `tokens` (no repeats) becomes the node's own list. */
  /** `describe`: its blockers as the lock service or a reservation gave them; `undefined`: what holds its keys and pools in this run (see `blockers`). */
  /** `count` (a run nobody observes): its conflicts with holders of its keys, counted by key from now on; -1: not counted. */
  private park(
    node: Node,
    tokens: Array<number>,
    describe: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined,
    count = -1
  ): void {
    const wait = waitOf(node)
    const blocking = tokens
    wait.blockingTokens = blocking
    this.setCount(node, count)
    for (const token of blocking) this.addWaiter(token, node)
    if (!wait.intent) {
      wait.intent = true
      this.intents.add(node, node.request!.keys)
    }
    let changed = false
    if (this.host.observing) {
      const key = blocking.join(",")
      changed = key !== wait.tokenKey
      wait.tokenKey = key
    }
    wait.describeBlockers = describe
    this.host.parked(node, changed)
    // Agents that followed it (see `wakeFreed`) need not wait for it any longer.
    if (!wait.reserved) this.onRelease(reservedToken(node))
  }

  /**
   * What blocks a waiting `node` now: its blockers as the lock service or a reservation gave them
   * (`WaitState.describeBlockers`), or else what holds its keys and pools in this run (no function
   * kept per waiting agent); none for an agent that does not wait.
   */
  blockers(node: Node): ReadonlyArray<ResourceLocks.Blocker> {
    const wait = node.wait
    if (wait === undefined) return []
    if (wait.describeBlockers !== undefined) return wait.describeBlockers()
    const request = node.request!
    return this.describe(this.held.conflicts(request.keys), this.poolHits(request))
  }

  private reservedAhead(node: Node, request: Claims.Request): Node | undefined {
    if (this.reserved.size === 0) return undefined
    for (const hit of this.reserved.conflicts(request.keys, node)) if (before(hit.holder, node)) return hit.holder
    return undefined
  }

  /**
   * `node` takes its keys (in a run nobody observes, when it holds them in the run's view; otherwise
   * when it is granted its lease): a parked agent waiting for them and counted by key gains its
   * conflicts with it (`counts`), so it is woken only once every holder of its keys has let
   * go (`letGo`); each agent waiting for them that came first is overtaken by it on each of those
   * keys (see `bypass`), which is logged once per key and counted only when a waiter could have
   * reached `maxBypass`.
   */
  private passOver(node: Node, request: Claims.Request): void {
    this.takeMark = ++this.grants
    this.subject = node
    this.intents.eachConflictSet(request.keys, this.overtakeAll)
    this.subject = undefined
  }

  /** `passOver`'s step for the waiters of one key. */
  private readonly overtakeAll = (waiters: HolderList<Node>): void => {
    const items = waiters.items
    const node = this.subject!
    const counts = this.counts
    for (let i = 0; i < waiters.size; i++) {
      const other = items[i]!
      const count = counts[other.index]!
      if (count >= 0 && other !== node && other.state === "parked") counts[other.index] = count + 1
    }
    if (!waiters.log(node, this.takeMark)) return
    // `since` grows along the list: no waiter can have been overtaken more often than the first.
    if (waiters.eventCount - waiters.since[0]! < this.host.maxBypass) return
    for (let i = 0; i < waiters.size; i++) {
      const other = items[i]!
      if (other !== node && !other.wait!.reserved && before(other, node)) this.overtaken(other, waiters, i)
    }
  }

  /** Reserves `other` (the `at`th of `waiters`) once agents behind it have taken that key `maxBypass` times while it waited. */
  private overtaken(other: Node, waiters: HolderList<Node>, at: number): void {
    if (bypass(other, waiters, at) < this.host.maxBypass) return
    other.wait!.reserved = true
    this.reserved.add(other, other.request!.keys)
  }

  /** Sets `node`'s count of conflicts with holders of its keys (-1: not counted, see `counts`). */
  private setCount(node: Node, count: number): void {
    const counts = this.counts
    while (counts.length <= node.index) counts.push(-1)
    counts[node.index] = count
  }

  /** Whether a parked agent has no conflict left with holders of its keys (or is not counted by key). */
  private heldFree(node: Node): boolean {
    return !(this.counts[node.index]! > 0)
  }

  /** Parks `node` on `token`. A new list starts with room for one (most hold one or two). */
  private addWaiter(token: number, node: Node): void {
    if (token >= 0) {
      const list = this.parkedOn.get(token)
      if (list === undefined) this.parkedOn.set(token, [node])
      else list.push(node)
      return
    }
    const index = -1 - token
    const followers = this.followers
    while (followers.length <= index) followers.push(undefined)
    const list = followers[index]
    if (list === undefined) followers[index] = [node]
    else list.push(node)
  }

  /** The agents parked on `token`, which no longer lists them. */
  private takeWaiters(token: number): Array<Node> | undefined {
    if (token >= 0) {
      const list = this.parkedOn.get(token)
      if (list !== undefined) this.parkedOn.delete(token)
      return list
    }
    const index = -1 - token
    const list = this.followers[index]
    if (list !== undefined) this.followers[index] = undefined
    return list
  }

  private reservedBy(node: Node, other: Node): ReadonlyArray<ResourceLocks.Blocker> {
    return Claims.conflicts(node.request!, other.request!).map((key) => ({
      _tag: "Key",
      key,
      mode: "write",
      holder: { runId: this.host.runId, agentId: `${other.id} (reserved: waiting longest)` },
      leaseId: reservedToken(other)
    }))
  }

  private poolHits(
    request: Claims.Request
  ): Array<{ readonly claim: Claims.PoolClaim; readonly holders: ReadonlyArray<Node> }> {
    const hits: Array<{ readonly claim: Claims.PoolClaim; readonly holders: ReadonlyArray<Node> }> = []
    for (const claim of request.pools) {
      const use = this.pools.get(claim.pool)
      if (use !== undefined && use.used + claim.amount > claim.capacity) hits.push({ claim, holders: [...use.holders] })
    }
    return hits
  }

  private describe(
    keyHits: ReadonlyArray<Hit<Node>>,
    poolHits: ReadonlyArray<{ readonly claim: Claims.PoolClaim; readonly holders: ReadonlyArray<Node> }>
  ): ReadonlyArray<ResourceLocks.Blocker> {
    const holder = (node: Node) => ({ runId: this.host.runId, agentId: node.id })
    return [
      ...keyHits.map(
        (hit): ResourceLocks.Blocker => ({
          _tag: "Key",
          key: hit.key,
          mode: hit.mode,
          holder: holder(hit.holder),
          leaseId: hit.holder.lease?.id ?? 0
        })
      ),
      ...poolHits.map(
        ({ claim, holders }): ResourceLocks.Blocker => ({
          _tag: "Pool",
          pool: claim.pool,
          holders: holders.map(holder),
          leaseIds: holders.map((node) => node.lease?.id ?? 0)
        })
      )
    ]
  }
}

const reservedToken = (node: Node): number => -1 - node.index

/**
 * Whether this is the first time one walk over a token's waiters (`visit`) meets `node`: a list
 * may name an agent twice (a hand-over appends the reserved token's waiters to the lease's), and a
 * walk treats it as the set it stands for, in the order each agent was first added.
 */
const firstVisit = (node: Node, visit: number): boolean => {
  const wait = node.wait
  if (wait === undefined) return true
  if (wait.visitMark === visit) return false
  wait.visitMark = visit
  return true
}

/**
 * How often agents behind `node` (the `at`th of `waiters`) have taken that key while it waited:
 * the events logged since it came whose agent it came before, counted from where the last count
 * stopped (`WaitState.bypass`). The fairness bound is per key, so a waiter for several hot keys is
 * not reserved by the sum of several keys' ordinary traffic.
 */
const bypass = (node: Node, waiters: HolderList<Node>, at: number): number => {
  const wait = node.wait!
  const entries = (wait.bypass ??= [])
  let i = 0
  while (i < entries.length && entries[i] !== waiters) i += 3
  if (i === entries.length) entries.push(waiters, 0, waiters.since[at]!)
  let count = entries[i + 1] as number
  const events = waiters.events
  for (let j = entries[i + 2] as number; j < waiters.eventCount; j++) if (before(node, events[j]!)) count++
  entries[i + 1] = count
  entries[i + 2] = waiters.eventCount
  return count
}

const byPriority = (a: Node, b: Node): number => (before(a, b) ? -1 : 1)

/** Sorts the first `count` of `nodes` best first: a short list (the usual batch) by insertion in place, which allocates nothing. */
const sortByPriority = (nodes: Array<Node>, count: number): void => {
  if (count > 32) {
    const head = nodes.slice(0, count).sort(byPriority)
    for (let i = 0; i < count; i++) nodes[i] = head[i]!
    return
  }
  for (let i = 1; i < count; i++) {
    const node = nodes[i]!
    let j = i
    while (j > 0 && before(node, nodes[j - 1]!)) {
      nodes[j] = nodes[j - 1]!
      j--
    }
    nodes[j] = node
  }
}

const sorted = (nodes: ReadonlyArray<Node>, count: number): boolean => {
  for (let i = 1; i < count; i++) if (before(nodes[i]!, nodes[i - 1]!)) return false
  return true
}

/** The index of the first of `nodes`' first `count` whose keys conflict with `request`'s, or -1. */
const conflicting = (request: Claims.Request, nodes: ReadonlyArray<Node>, count: number): number => {
  for (let i = 0; i < count; i++) if (keysConflict(request, nodes[i]!.request!)) return i
  return -1
}

const overlaps = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false
  return true
}

/** A key both requests write (`""` when none): the agents of one wait queue all write it. */
const sharedWrite = (a: Claims.Request, b: Claims.Request): string => {
  for (const x of a.keys) {
    if (x.mode === "write" && writes(b, x.key)) return x.key
  }
  return ""
}

const writes = (request: Claims.Request, key: string): boolean => {
  for (const claim of request.keys) if (claim.mode === "write" && claim.key === key) return true
  return false
}

/** Whether two requests' key claims conflict (`Claims.conflicts` without building the list). */
const keysConflict = (a: Claims.Request, b: Claims.Request): boolean => {
  for (const x of a.keys) {
    for (const y of b.keys) {
      if ((x.mode === "write" || y.mode === "write") && overlaps(x.segments, y.segments)) return true
    }
  }
  return false
}

/** Adds `token` to a list of tokens unless it is there (a handful at most: one per holder of the agent's keys). */
const addToken = (tokens: Array<number>, token: number): void => {
  if (!tokens.includes(token)) tokens.push(token)
}

/** Removes `token` from a list of tokens, keeping the order of the rest; whether it was there. */
const deleteToken = (tokens: Array<number>, token: number): boolean => {
  const i = tokens.indexOf(token)
  if (i < 0) return false
  tokens.splice(i, 1)
  return true
}

const holderToken = (node: Node): number => (node.lease === undefined ? reservedToken(node) : node.lease.id)

const serviceTokens = (blockers: ReadonlyArray<ResourceLocks.Blocker>): Array<number> => {
  const tokens = new Set<number>()
  for (const blocker of blockers) {
    if (blocker._tag === "Key") tokens.add(blocker.leaseId)
    else for (const id of blocker.leaseIds) tokens.add(id)
  }
  return [...tokens]
}
