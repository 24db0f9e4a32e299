import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import fc from "fast-check"
import * as Agent from "../src/Agent.ts"
import * as Claims from "../src/Claims.ts"
import type * as ResourceLocks from "../src/ResourceLocks.ts"
import { makeMemory } from "../src/ResourceLocks.ts"
import { ClaimGate } from "../src/internal/claimGate.ts"
import type { KeyTree } from "../src/internal/keyTree.ts"
import { before, Node } from "../src/internal/node.ts"

const KEYS = ["a", "a/b", "a/b/c", "a/d", "e", "e/f"]

const claimsArb = fc.record({
  write: fc.uniqueArray(fc.constantFrom(...KEYS), { maxLength: 3 }),
  read: fc.uniqueArray(fc.constantFrom(...KEYS), { maxLength: 2 })
})

const poolClaimsArb = fc.record({
  write: fc.uniqueArray(fc.constantFrom(...KEYS), { maxLength: 2 }),
  read: fc.uniqueArray(fc.constantFrom(...KEYS), { maxLength: 1 }),
  pools: fc.option(fc.record({ p: fc.integer({ min: 1, max: 2 }) }), { nil: undefined })
})

const queueClaimsArb = fc.record({
  write: fc.uniqueArray(fc.constantFrom("a", "e", "e/f"), { minLength: 1, maxLength: 2 }),
  pools: fc.option(fc.record({ p: fc.integer({ min: 1, max: 3 }) }), { nil: undefined })
})

const conflict = (x: Claims.KeyClaim, y: Claims.KeyClaim): boolean => {
  if (x.mode === "read" && y.mode === "read") return false
  const n = Math.min(x.segments.length, y.segments.length)
  for (let i = 0; i < n; i++) if (x.segments[i] !== y.segments[i]) return false
  return true
}

/**
 * Drives a gate of a run nobody observes on an in-memory lock service as the runner does (check,
 * then take the lease; end: detach, release), in an order fast-check picks, and checks after each
 * step which agents the fairness bound reserved against a count kept per waiter and key. With
 * `drain`, it then runs the agents left, one at a time, until none is ready or running.
 */
const drive = (
  requests: ReadonlyArray<Claims.Request>,
  steps: ReadonlyArray<number>,
  maxBypass: number,
  drain = false
) => {
  const nodes = requests.map(
    (request, index) =>
      new Node(index, Agent.make(`agent${index}`, { run: Effect.void }), request, undefined, undefined, 1, [])
  )
  const ready: Array<Node> = []
  const running: Array<Node> = []
  const leases = new Map<Node, ResourceLocks.Lease>()
  const end = (node: Node) => {
    gate.detach(node)
    node.state = "done"
    gate.releaseNow(node, leases.get(node)!)
  }
  const gate = new ClaimGate({
    runId: "run",
    locks: makeMemory(),
    maxBypass,
    observing: false,
    makeReady: (node) => {
      node.state = "ready"
      ready.push(node)
    },
    wake: () => {},
    parked: (node) => {
      node.state = "parked"
    },
    granted: (node, lease) => {
      node.state = "running"
      running.push(node)
      leases.set(node, lease)
    }
  })
  gate.table!.subscribe((lease) => gate.onRelease(lease.id))
  for (const node of nodes) {
    node.state = "ready"
    ready.push(node)
  }
  // Reference (the gate's former per-waiter count): each time an agent takes its keys, every agent
  // waiting for them that came before it is overtaken once on each of its keys the taker conflicts with.
  const overtaken = new Map<Node, Map<string, number>>()
  const took = (taker: Node) => {
    for (const node of nodes) {
      if (node === taker || node.wait?.intent !== true || !before(node, taker)) continue
      const counts = overtaken.get(node) ?? new Map<string, number>()
      overtaken.set(node, counts)
      for (const claim of node.request!.keys) {
        if (taker.request!.keys.some((other) => conflict(claim, other)))
          counts.set(claim.key, (counts.get(claim.key) ?? 0) + 1)
      }
    }
  }
  const checkReserved = (after: string) => {
    for (const node of nodes) {
      const expected = [...(overtaken.get(node)?.values() ?? [])].some((count) => count >= maxBypass)
      assert.strictEqual(node.wait?.reserved ?? false, expected, `${node.id} reserved after ${after}`)
    }
    checkTrees(gate, nodes, running, after)
    checkTokens(gate, nodes, after)
    checkCounts(gate, nodes, after)
  }
  for (const step of steps) {
    if (step % 2 === 0 && ready.length > 0) {
      const node = ready.splice(Math.floor(step / 2) % ready.length, 1)[0]!
      if (node.state !== "ready") continue
      if (gate.check(node)) {
        took(node)
        gate.acquireNow(node)
      }
      checkReserved(`check ${node.id}`)
    } else if (running.length > 0) {
      const node = running.splice(Math.floor(step / 2) % running.length, 1)[0]!
      end(node)
      checkReserved(`end ${node.id}`)
    }
  }
  if (drain) {
    while (ready.length > 0 || running.length > 0) {
      const node = ready.shift() ?? running.shift()!
      if (node.state === "running") end(node)
      else if (node.state === "ready" && gate.check(node)) gate.acquireNow(node)
    }
  }
  return nodes
}

/** The gate's key trees, read as the tree lists them (`KeyTree.entries`). */
type Trees = Record<"held" | "intents" | "reserved", KeyTree<Node>>

/**
 * What each key tree of a gate lists, against the agents' states: holders of keys (the running
 * agents), intents (agents whose wait has one) and reserved agents (with an intent), each under
 * exactly its request's keys, once (`KeyTree.add` does not look for a holder already listed).
 */
const checkTrees = (gate: ClaimGate, nodes: ReadonlyArray<Node>, running: ReadonlyArray<Node>, after: string) => {
  const trees = gate as unknown as Trees
  const expected: Record<keyof Trees, ReadonlyArray<Node>> = {
    held: running,
    intents: nodes.filter((node) => node.wait?.intent === true),
    reserved: nodes.filter((node) => node.wait?.intent === true && node.wait.reserved)
  }
  for (const name of ["held", "intents", "reserved"] as const) {
    const listed = trees[name]
      .entries()
      .map((hit) => `${hit.holder.id} ${hit.key} ${hit.mode}`)
      .sort()
    const wanted = expected[name]
      .flatMap((node) => node.request!.keys.map((claim) => `${node.id} ${claim.key} ${claim.mode}`))
      .sort()
    assert.deepStrictEqual(listed, wanted, `${name} after ${after}`)
    assert.strictEqual(trees[name].size, wanted.length, `${name} size after ${after}`)
  }
}

/** The gate's lists of the agents parked on each lease (by its id) and on each agent's reserved token (by its index). */
interface Waiters {
  readonly parkedOn: Map<number, ReadonlyArray<Node>>
  readonly followers: ReadonlyArray<ReadonlyArray<Node> | undefined>
}

/**
 * Each token a parked agent waits for lists it among its waiters, so the token's release visits it:
 * an agent whose list names a token it is not parked on would wait for nothing. A parked agent no
 * token lists has conflicts with holders of its keys left (`counts`), whose release wakes it.
 */
const checkTokens = (gate: ClaimGate, nodes: ReadonlyArray<Node>, after: string) => {
  const { counts, followers, parkedOn } = gate as unknown as Waiters & { counts: ReadonlyArray<number> }
  const listed = new Set([...parkedOn.values(), ...followers].flatMap((waiters) => waiters ?? []))
  for (const node of nodes) {
    if (node.state !== "parked") continue
    for (const token of node.wait?.blockingTokens ?? []) {
      const waiters = token >= 0 ? parkedOn.get(token) : followers[-1 - token]
      assert.isTrue(waiters?.includes(node) ?? false, `${node.id} waits for token ${token} after ${after}`)
    }
    if (!listed.has(node)) assert.isAbove(counts[node.index] ?? -1, 0, `${node.id} waits for nothing after ${after}`)
  }
}

/**
 * Each parked agent counted by key (`counts` ≥ 0) has as many conflicting claim pairs with the
 * agents holding keys in the run's view (`held`) as its count says: a release that missed one of
 * its waiters, or a take that counted one twice, would wake it too early or never.
 */
const checkCounts = (gate: ClaimGate, nodes: ReadonlyArray<Node>, after: string) => {
  const { counts, held } = gate as unknown as { counts: ReadonlyArray<number>; held: KeyTree<Node> }
  const holding = held.entries()
  for (const node of nodes) {
    const count = counts[node.index] ?? -1
    if (node.state !== "parked" || count < 0) continue
    let pairs = 0
    for (const hit of holding) {
      if (hit.holder === node) continue
      for (const claim of node.request!.keys) {
        if (conflict(claim, { key: hit.key, segments: hit.key.split("/"), mode: hit.mode })) pairs++
      }
    }
    assert.strictEqual(count, pairs, `${node.id}'s count of conflicts with holders after ${after}`)
  }
}

interface DrainSizes {
  readonly agents: readonly [number, number]
  readonly steps: readonly [number, number]
  readonly step: number
  readonly bypass: number
  readonly pool: number
  readonly runs: number
}

/** Property: agents of `claimsArb` (pool `p` of `pool` slots), driven in any order and drained, all end done. */
const drainsEveryAgent = (claimsArb: fc.Arbitrary<Claims.Claims>, sizes: DrainSizes) =>
  fc.assert(
    fc.property(
      fc.array(claimsArb, { minLength: sizes.agents[0], maxLength: sizes.agents[1] }),
      fc.array(fc.nat({ max: sizes.step }), { minLength: sizes.steps[0], maxLength: sizes.steps[1] }),
      fc.integer({ min: 1, max: sizes.bypass }),
      (claims, steps, maxBypass) => {
        const requests = claims.map((claim) => Result.getOrThrow(Claims.normalize(claim, { p: sizes.pool })))
        const nodes = drive(requests, steps, maxBypass, true)
        for (const node of nodes) assert.strictEqual(node.state, "done", `${node.id} after the drain`)
      }
    ),
    { numRuns: sizes.runs }
  )

describe("ClaimGate", () => {
  it("property: an agent is reserved once agents after it have taken one of its keys maxBypass times while it waited", () => {
    fc.assert(
      fc.property(
        fc.array(claimsArb, { minLength: 2, maxLength: 10 }),
        fc.array(fc.nat({ max: 40 }), { minLength: 10, maxLength: 120 }),
        fc.integer({ min: 1, max: 4 }),
        (claims, steps, maxBypass) => {
          const requests = claims.map((claim) => Result.getOrThrow(Claims.normalize(claim, {})))
          drive(requests, steps, maxBypass)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("property: with queues behind woken agents on a few hot keys, every agent runs once those before it end", () => {
    drainsEveryAgent(queueClaimsArb, { agents: [4, 30], steps: [20, 200], step: 60, bypass: 8, pool: 3, runs: 300 })
  })

  it("property: with keys and a pool, every agent runs once those before it end (no agent left waiting for nothing)", () => {
    drainsEveryAgent(poolClaimsArb, { agents: [2, 10], steps: [10, 120], step: 40, bypass: 4, pool: 2, runs: 1000 })
  })
})
