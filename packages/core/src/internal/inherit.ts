/**
 * Claims a run nested inside an agent inherits from that agent (and from the agents enclosing it).
 *
 * The enclosing agent's lease already keeps every other holder off its keys, so a nested claim
 * that the agent's claims cover (an equal or enclosing key, in `write` mode or both `read`) is
 * granted without asking the lock layer again: only the nested run's own claim gate orders nested
 * agents among themselves. Nested claims that do not overlap the agent's keys go to the lock layer
 * as usual and wait for other holders. A nested claim that overlaps the agent's keys without being
 * covered (a write inside a held read, a folder around a held file) could only wait for the agent
 * itself, so the nested run rejects it before anything starts.
 */
import * as Effect from "effect/Effect"
import type { Scope } from "effect/Scope"
import type * as Claims from "../Claims.ts"
import { ClaimDeadlock, type Issue } from "../CorralError.ts"
import type * as ResourceLocks from "../ResourceLocks.ts"
import { type LockTable, memoryTables } from "./lockTable.ts"
import { type Wait, WaitGraph } from "./waitGraph.ts"

/**
 * Claims held by one enclosing agent, and those of the agents around it. `holds()` turns `false`
 * once the agent released them (a fiber it forked may start a run after it ended): from then on
 * nothing is inherited from it.
 */
export interface Held {
  readonly holder: ResourceLocks.Holder
  readonly request: Claims.Request
  readonly outer: Held | undefined
  readonly holds: () => boolean
  /** The agent's lease while it holds one. */
  readonly lease: () => ResourceLocks.Lease | undefined
}

/** What a nested run starts from: the lock service to use and the claims it may reuse. */
export interface Inherited {
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly held: Held | undefined
}

const isPrefix = (outer: ReadonlyArray<string>, inner: ReadonlyArray<string>): boolean => {
  if (outer.length > inner.length) return false
  for (let i = 0; i < outer.length; i++) if (outer[i] !== inner[i]) return false
  return true
}

const overlaps = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length <= b.length ? isPrefix(a, b) : isPrefix(b, a)

const covers = (request: Claims.Request, claim: Claims.KeyClaim): boolean =>
  request.keys.some(
    (held) => isPrefix(held.segments, claim.segments) && (held.mode === "write" || claim.mode === "read")
  )

const clash = (request: Claims.Request, claim: Claims.KeyClaim): Claims.KeyClaim | undefined =>
  request.keys.find(
    (held) => (held.mode === "write" || claim.mode === "write") && overlaps(held.segments, claim.segments)
  )

/** The request without the keys `held` covers: what the lock layer must still grant. */
export const strip = (request: Claims.Request, held: Held): Claims.Request => {
  if (!held.holds()) return request
  const keys = request.keys.filter((claim) => !covers(held.request, claim))
  return keys.length === request.keys.length ? request : { keys, pools: request.pools }
}

/** The request without the keys `held` or an agent around it covers. */
const stripAll = (request: Claims.Request, held: Held): Claims.Request => {
  let stripped = request
  for (let level: Held | undefined = held; level !== undefined; level = level.outer) stripped = strip(stripped, level)
  return stripped
}

const graphs = new WeakMap<LockTable, WaitGraph>()

const graphOf = (table: LockTable): WaitGraph => {
  let graph = graphs.get(table)
  if (graph === undefined) graphs.set(table, (graph = new WaitGraph()))
  return graph
}

type Service = ResourceLocks.ResourceLocks["Service"]

/**
 * The lock service of a nested run: covered keys are stripped before they reach `locks`. On an
 * in-memory lock service (`table`, of the service under every nested run), a request about to
 * wait is checked against the wait-for graph: one that would close a cycle dies with
 * `ClaimDeadlock`; one that waits is kept in the graph until it is granted, asks again, its agent
 * ends (`forget`) or its run ends.
 */
class NestedLocks implements Service {
  readonly root: Service
  private readonly locks: Service
  private readonly held: Held
  private readonly table: LockTable | undefined
  private waits: Map<string, Wait> | undefined = undefined
  private bounded: Set<string> | undefined = undefined

  constructor(locks: Service, held: Held) {
    this.locks = locks
    this.held = held
    this.root = locks instanceof NestedLocks ? locks.root : locks
    this.table = memoryTables.get(this.root)
  }

  tryAcquire(holder: ResourceLocks.Holder, request: Claims.Request): Effect.Effect<ResourceLocks.Attempt> {
    if (this.table === undefined) return this.locks.tryAcquire(holder, strip(request, this.held))
    const stripped = stripAll(request, this.held)
    if (this.bounded?.has(holder.agentId)) return this.root.tryAcquire(holder, stripped)
    return Effect.flatMap(this.root.tryAcquire(holder, stripped), (attempt) => {
      this.forget(holder.agentId)
      return attempt._tag === "Acquired" ? Effect.succeed(attempt) : this.blocked(holder, stripped, attempt)
    })
  }

  acquire(holder: ResourceLocks.Holder, request: Claims.Request): Effect.Effect<ResourceLocks.Lease, never, Scope> {
    return this.locks.acquire(holder, strip(request, this.held))
  }

  release(lease: ResourceLocks.Lease): Effect.Effect<void> {
    return this.locks.release(lease)
  }

  blockers(request: Claims.Request): Effect.Effect<ReadonlyArray<ResourceLocks.Blocker>> {
    return this.locks.blockers(strip(request, this.held))
  }

  get snapshot(): Effect.Effect<ResourceLocks.Snapshot> {
    return this.locks.snapshot
  }

  onRelease(listener: (lease: ResourceLocks.Lease) => void): Effect.Effect<void, never, Scope> {
    const table = this.table
    if (table === undefined) return this.locks.onRelease(listener)
    return Effect.asVoid(
      Effect.acquireRelease(
        Effect.sync(() => table.subscribe(listener)),
        (unsubscribe) =>
          Effect.sync(() => {
            unsubscribe()
            this.forgetAll()
          })
      )
    )
  }

  /** Marks agents of the run whose waits `claimTimeout` bounds: they are neither checked nor kept. */
  bound(agentIds: ReadonlyArray<string>): void {
    if (agentIds.length > 0) this.bounded = new Set(agentIds)
  }

  /** Drops the wait kept for the run's agent `agentId`, if any. */
  forget(agentId: string): void {
    const wait = this.waits?.get(agentId)
    if (wait === undefined) return
    this.waits!.delete(agentId)
    graphOf(this.table!).remove(wait)
  }

  private forgetAll(): void {
    if (this.waits === undefined) return
    const graph = graphOf(this.table!)
    for (const wait of this.waits.values()) graph.remove(wait)
    this.waits = undefined
  }

  private blocked(
    holder: ResourceLocks.Holder,
    request: Claims.Request,
    attempt: ResourceLocks.Attempt
  ): Effect.Effect<ResourceLocks.Attempt> {
    const table = this.table!
    const chain: Array<ResourceLocks.Lease> = []
    for (let level: Held | undefined = this.held; level !== undefined; level = level.outer) {
      const lease = level.lease()
      if (lease !== undefined) chain.push(lease)
    }
    const wait: Wait = { holder, chain, blockers: table.keyBlockers(request) }
    const graph = graphOf(table)
    const cycle = graph.cycle(wait, (lease) => table.holds(lease))
    if (cycle !== undefined) return Effect.die(new ClaimDeadlock({ agent: holder, cycle }))
    ;(this.waits ??= new Map()).set(holder.agentId, wait)
    graph.add(wait)
    return Effect.succeed(attempt)
  }
}

/** A lock service for a nested run inside the agent `held` describes (see `NestedLocks`). */
export const inheritLocks = (locks: Service, held: Held): Service => new NestedLocks(locks, held)

/**
 * Marks the agents `agentIds` of the nested run whose lock service is `locks` as having a
 * `claimTimeout`: a wait that ends by itself closes no cycle for ever, so their requests are
 * neither checked nor kept in the wait-for graph.
 */
export const boundWaits = (locks: Service, agentIds: ReadonlyArray<string>): void => {
  if (locks instanceof NestedLocks) locks.bound(agentIds)
}

/** How many nested waits the wait-for graph of the in-memory lock service `locks` keeps. */
export const waitCount = (locks: Service): number => {
  const table = memoryTables.get(locks)
  return table === undefined ? 0 : (graphs.get(table)?.size ?? 0)
}

/** Drops the wait kept for agent `agentId` of the nested run whose lock service is `locks`, if any. */
export const forgetWait = (locks: Service, agentId: string): void => {
  if (locks instanceof NestedLocks) locks.forget(agentId)
}

/** Nested claims that overlap an enclosing agent's claims without being covered by them. */
export const checkNested = (
  agentId: string,
  request: Claims.Request,
  held: Held | undefined,
  issues: Array<Issue>
): void => {
  for (const claim of request.keys) {
    for (let level = held; level !== undefined; level = level.outer) {
      if (!level.holds()) continue
      if (covers(level.request, claim)) break
      const other = clash(level.request, claim)
      if (other === undefined) continue
      issues.push({
        agentId,
        field: "claims",
        message:
          `${claim.mode} ${JSON.stringify(claim.key)} overlaps the enclosing agent ` +
          `${JSON.stringify(level.holder.agentId)}'s ${other.mode} claim on ${JSON.stringify(other.key)} ` +
          `(run ${level.holder.runId}) without being covered by it, so it could only wait for that agent; ` +
          "a run nested inside an agent may use keys the agent holds (reads inside a held read or write, " +
          "writes inside a held write) or keys that do not overlap them"
      })
      break
    }
  }
}
