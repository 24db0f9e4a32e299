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

/** The lock service under every nested run's wrapper, by wrapper. */
const roots = new WeakMap<object, ResourceLocks.ResourceLocks["Service"]>()
const graphs = new WeakMap<LockTable, WaitGraph>()
const forgetters = new WeakMap<object, (agentId: string) => void>()

/** Drops the wait kept for agent `agentId` of the nested run whose lock service is `locks`, if any. */
export const forgetWait = (locks: ResourceLocks.ResourceLocks["Service"], agentId: string): void =>
  forgetters.get(locks)?.(agentId)

const graphOf = (table: LockTable): WaitGraph => {
  let graph = graphs.get(table)
  if (graph === undefined) graphs.set(table, (graph = new WaitGraph()))
  return graph
}

/**
 * A lock service for a nested run: covered keys are stripped before they reach `locks`. On an
 * in-memory lock service, a request about to wait is checked against the wait-for graph: one that
 * would close a cycle dies with `ClaimDeadlock`; one that waits is kept in the graph until it is
 * granted, asks again or its run ends.
 */
export const inheritLocks = (
  locks: ResourceLocks.ResourceLocks["Service"],
  held: Held
): ResourceLocks.ResourceLocks["Service"] => {
  const root = roots.get(locks) ?? locks
  const table = memoryTables.get(root)
  const service: ResourceLocks.ResourceLocks["Service"] = {
    ...locks,
    tryAcquire: (holder, request) => locks.tryAcquire(holder, strip(request, held)),
    acquire: (holder, request) => locks.acquire(holder, strip(request, held)),
    blockers: (request) => locks.blockers(strip(request, held))
  }
  if (table === undefined) {
    roots.set(service, root)
    return service
  }
  const graph = graphOf(table)
  const waits = new Map<string, Wait>()
  const forgetAll = (): void => {
    for (const wait of waits.values()) graph.remove(wait)
    waits.clear()
  }
  const forget = (agentId: string): void => {
    const wait = waits.get(agentId)
    if (wait === undefined) return
    waits.delete(agentId)
    graph.remove(wait)
  }
  const blocked = (holder: ResourceLocks.Holder, request: Claims.Request): Effect.Effect<void> => {
    const chain: Array<ResourceLocks.Lease> = []
    for (let level: Held | undefined = held; level !== undefined; level = level.outer) {
      const lease = level.lease()
      if (lease !== undefined) chain.push(lease)
    }
    const wait: Wait = { holder, chain, blockers: table.keyBlockers(request) }
    const cycle = graph.cycle(wait, (lease) => table.holds(lease))
    if (cycle !== undefined) return Effect.die(new ClaimDeadlock({ agent: holder, cycle }))
    waits.set(holder.agentId, wait)
    graph.add(wait)
    return Effect.void
  }
  const detecting: ResourceLocks.ResourceLocks["Service"] = {
    ...service,
    tryAcquire: (holder, request) => {
      const stripped = stripAll(request, held)
      return Effect.flatMap(root.tryAcquire(holder, stripped), (attempt): Effect.Effect<ResourceLocks.Attempt> => {
        forget(holder.agentId)
        return attempt._tag === "Acquired" ? Effect.succeed(attempt) : Effect.as(blocked(holder, stripped), attempt)
      })
    },
    onRelease: (listener) =>
      Effect.andThen(
        Effect.addFinalizer(() => Effect.sync(forgetAll)),
        locks.onRelease(listener)
      )
  }
  roots.set(detecting, root)
  forgetters.set(detecting, forget)
  return detecting
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
