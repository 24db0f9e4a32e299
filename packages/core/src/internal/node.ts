import type * as Agent from "../Agent.ts"
import type * as Claims from "../Claims.ts"
import type * as Outcome from "../Outcome.ts"
import type * as ResourceLocks from "../ResourceLocks.ts"
import * as Usage from "../Usage.ts"
import { succeededAt } from "./execute.ts"
import { forgetWait, type Held, type Inherited, inheritLocks } from "./inherit.ts"
import type { NodeState } from "./lifecycle.ts"

/** What a node needs from its run to serve as the agent's `Agent.Frame`. */
export interface NodeHost {
  readonly runId: string
  /** When the run queued its roots: the `queuedAt` of every agent that never waited for a dependency. */
  readonly startedAt: number
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly held: Held | undefined
  readonly report: (node: Node, usage: Partial<Usage.Usage>) => boolean
  readonly releaseSlot: (node: Node) => boolean
}

/** State of an agent that waits for claims; allocated only for agents that ever wait. */
export class WaitState {
  /**
   * How often agents behind it took each of its keys while it waited, as far as counted (see
   * `bypass` in `ClaimGate`): three entries per key, its holder list in the gate's tree of waiters,
   * the count, and the position in that list's log of takes up to which it is counted.
   */
  bypass: Array<object | number> | undefined = undefined
  /** The last walk over a token's waiters that met this agent (see `ClaimGate`). */
  visitMark = 0
  reserved = false
  intent = false
  timer = false
  /** The leases and reserved tokens it waits for, each once. */
  blockingTokens: Array<number> | undefined = undefined
  /** The last `wakeFreed` batch that examined it. */
  batchMark = 0
  tokenKey = ""
  /** Its blockers as the lock service or a reservation gave them; `undefined`: what holds its keys and pools in the run (`ClaimGate.blockers`). */
  describeBlockers: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined = undefined
}

export const waitOf = (node: Node): WaitState => (node.wait ??= new WaitState())

/**
 * What validation settled about an agent besides its claims and the run never changes: one shared
 * object for agents without timeouts, an estimate or dependencies (with or without claims).
 */
interface Spec {
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly estimateMs: number
  readonly depIndices: ReadonlyArray<number>
}

const noIndices: ReadonlyArray<number> = []

const plainSpec: Spec = {
  timeoutMs: undefined,
  claimTimeoutMs: undefined,
  estimateMs: 1,
  depIndices: noIndices
}

/**
 * The state of a node that most agents never have (dependencies, a lease, a ledger key, usage, a
 * claim wait, a queue time of its own): created on the first write of any of it.
 */
class Extra {
  deps: Array<Node> = noNodes
  dependents: Array<Node> = noNodes
  depsLeft = 0
  /** `undefined`: queued when the run started. */
  queuedAt: number | undefined = undefined
  usage: Usage.Usage = Usage.zero
  lease: ResourceLocks.Lease | undefined = undefined
  fencingToken: number | undefined = undefined
  rateTaken = false
  ledgerKey: string | undefined = undefined
  wait: WaitState | undefined = undefined
  slotReleased = false
}

/**
 * One agent of a run. It is also the agent's `Agent.Frame`: the run binds the node itself to the
 * agent's context, so binding costs no allocation. A node lives until the run returns (except in
 * a compact run, see `Compact`), and at 100k+ agents the young-generation collector's copying of
 * them is a large share of a run's CPU, so a node keeps only what every agent uses in its own fields,
 * and its claims (every agent of a claims run has its own): the settings few agents have are in one
 * `spec` object (shared by agents without them), the state few agents have in an `Extra` created on
 * demand (read through accessors), a dependency's value is read from its outcome and the queue time
 * of an agent queued at the run's start is the run's.
 */
export class Node implements Agent.Frame {
  readonly index: number
  readonly agent: Agent.Any
  /** The agent's claims, resolved. */
  readonly request: Claims.Request | undefined
  private readonly spec: Spec
  priority: number
  state: NodeState = "waiting-deps"
  startedAt: number | undefined = undefined
  attempts = 0
  outcome: Outcome.Outcome | undefined = undefined
  host: NodeHost = detached
  private extra: Extra | undefined = undefined

  constructor(
    index: number,
    agent: Agent.Any,
    request: Claims.Request | undefined,
    timeoutMs: number | undefined,
    claimTimeoutMs: number | undefined,
    estimateMs: number,
    depIndices: ReadonlyArray<number>
  ) {
    this.index = index
    this.agent = agent
    this.request = request
    this.priority = estimateMs
    this.spec =
      timeoutMs === undefined && claimTimeoutMs === undefined && estimateMs === 1 && depIndices.length === 0
        ? plainSpec
        : { timeoutMs, claimTimeoutMs, estimateMs, depIndices }
  }

  get id(): string {
    return this.agent.id
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  get claimTimeoutMs(): number | undefined {
    return this.spec.claimTimeoutMs
  }

  get estimateMs(): number {
    return this.spec.estimateMs
  }

  get depIndices(): ReadonlyArray<number> {
    return this.spec.depIndices
  }

  private get more(): Extra {
    return (this.extra ??= new Extra())
  }

  get deps(): Array<Node> {
    return this.extra?.deps ?? noNodes
  }

  set deps(deps: Array<Node>) {
    this.more.deps = deps
  }

  get dependents(): Array<Node> {
    return this.extra?.dependents ?? noNodes
  }

  set dependents(dependents: Array<Node>) {
    this.more.dependents = dependents
  }

  get depsLeft(): number {
    return this.extra?.depsLeft ?? 0
  }

  set depsLeft(depsLeft: number) {
    this.more.depsLeft = depsLeft
  }

  /** When the agent became ready: the run's start unless it waited for dependencies. */
  get queuedAt(): number {
    return this.extra?.queuedAt ?? this.host.startedAt
  }

  set queuedAt(queuedAt: number) {
    this.more.queuedAt = queuedAt
  }

  get usage(): Usage.Usage {
    return this.extra?.usage ?? Usage.zero
  }

  set usage(usage: Usage.Usage) {
    this.more.usage = usage
  }

  get lease(): ResourceLocks.Lease | undefined {
    return this.extra?.lease
  }

  set lease(lease: ResourceLocks.Lease | undefined) {
    if (lease !== undefined || this.extra !== undefined) this.more.lease = lease
  }

  /** The token of the agent's lease; kept after the lease is released, for fibers the agent forked. */
  get fencingToken(): number | undefined {
    return this.extra?.fencingToken
  }

  set fencingToken(fencingToken: number | undefined) {
    if (fencingToken !== undefined || this.extra !== undefined) this.more.fencingToken = fencingToken
  }

  get rateTaken(): boolean {
    return this.extra?.rateTaken ?? false
  }

  set rateTaken(rateTaken: boolean) {
    if (rateTaken || this.extra !== undefined) this.more.rateTaken = rateTaken
  }

  get ledgerKey(): string | undefined {
    return this.extra?.ledgerKey
  }

  set ledgerKey(ledgerKey: string | undefined) {
    if (ledgerKey !== undefined || this.extra !== undefined) this.more.ledgerKey = ledgerKey
  }

  get wait(): WaitState | undefined {
    return this.extra?.wait
  }

  set wait(wait: WaitState | undefined) {
    if (wait !== undefined || this.extra !== undefined) this.more.wait = wait
  }

  /** The running agent gave its concurrency slot back (`Corral.releaseSlot`) and has not taken it again. */
  get slotReleased(): boolean {
    return this.extra?.slotReleased ?? false
  }

  set slotReleased(slotReleased: boolean) {
    if (slotReleased || this.extra !== undefined) this.more.slotReleased = slotReleased
  }

  /** The value of a node that succeeded. */
  get value(): unknown {
    return (this.outcome as Outcome.Succeeded | undefined)?.value
  }

  current(): Agent.Current {
    return {
      runId: this.host.runId,
      agentId: this.id,
      attempt: this.attempts,
      fencingToken: this.fencingToken
    }
  }

  report(usage: Partial<Usage.Usage>): boolean {
    return this.host.report(this, usage)
  }

  releaseSlot(): boolean {
    return this.host.releaseSlot(this)
  }

  /** The agent ended while it waited for claims: a wait kept for it in a wait-for graph is dropped. */
  stoppedWaiting(): void {
    if (this.host.held !== undefined) forgetWait(this.host.locks, this.id)
  }

  /** What a run nested inside this agent inherits: the agent's claims and its run's lock service. */
  inherited(): Inherited {
    const host = this.host
    if (this.request === undefined) return { locks: host.locks, held: host.held }
    const held: Held = {
      holder: { runId: host.runId, agentId: this.id },
      request: this.request,
      outer: host.held,
      holds: () => this.lease !== undefined,
      lease: () => this.lease
    }
    return { locks: inheritLocks(host.locks, held), held }
  }
}

/** The node of an agent that validation found plain (no claims, dependencies, timeouts, estimate or rate limit). */
export const plainNode = (index: number, agent: Agent.Any): Node =>
  new Node(index, agent, undefined, undefined, undefined, 1, noIndices)

const detached: NodeHost = {
  runId: "",
  startedAt: Number.NaN,
  get locks(): never {
    throw new Error("corral: node used outside a run")
  },
  held: undefined,
  report: () => false,
  releaseSlot: () => false
}

/** `a` starts before `b` when both are ready: the higher `priority` (see `prioritize`), then input order. */
export const before = (a: Node, b: Node): boolean =>
  a.priority > b.priority || (a.priority === b.priority && a.index < b.index)

const noNodes: Array<Node> = []

/** Links the nodes of a run with dependencies to each other and orders them by critical path. */
export const link = (nodes: ReadonlyArray<Node>): void => {
  const counts = new Uint32Array(nodes.length)
  let backward = true
  for (let n = 0; n < nodes.length; n++) {
    const node = nodes[n]!
    const depIndices = node.depIndices
    if (depIndices.length === 0) continue
    const deps: Array<Node> = new Array(depIndices.length)
    for (let i = 0; i < depIndices.length; i++) {
      const dep = depIndices[i]!
      if (dep >= node.index) backward = false
      deps[i] = nodes[dep]!
      counts[dep]!++
    }
    node.deps = deps
    node.depsLeft = deps.length
  }
  linkDependents(nodes, counts)
  if (backward) prioritizeBackward(nodes)
  else prioritize(nodes)
}

/**
 * Gives every node with dependents its `dependents`, in node order, each array made at its final
 * size from `counts` (pushing into an empty array reserves room for 17 first, for every node).
 */
const linkDependents = (nodes: ReadonlyArray<Node>, counts: Uint32Array): void => {
  const filled = new Uint32Array(nodes.length)
  for (let n = 0; n < nodes.length; n++) {
    const node = nodes[n]!
    const depIndices = node.depIndices
    for (let i = 0; i < depIndices.length; i++) {
      const dep = depIndices[i]!
      const target = nodes[dep]!
      if (target.dependents === noNodes) target.dependents = new Array(counts[dep]!)
      target.dependents[filled[dep]!++] = node
    }
  }
}

/**
 * Sets each node's `priority` to the length of the longest chain of dependents that starts at it,
 * itself included, in estimated milliseconds: its `estimateMs` (1 for an agent without an estimate)
 * plus the largest priority among the agents that depend on it. Ready agents start highest priority
 * first (`before`), which is longest-remaining-path-first list scheduling with estimates, and
 * deepest-chain-first (every agent counted as 1 ms) without them. On the `dag` bench graph it is
 * already the best schedule (321 ms for a bound of 320.75 ms, whole milliseconds); other priorities
 * (ties broken by the dependents' total work or by the longer task, critical path plus work ÷ slots,
 * hundreds of random-priority restarts: `apps/bench/src/dagprobe.ts offline`) did not beat it there
 * and beat it by at most 0.3% on other random graphs. Visits every node and edge once, sinks first.
 */
const prioritize = (nodes: ReadonlyArray<Node>): void => {
  const remaining = nodes.map((node) => node.dependents.length)
  const stack = nodes.filter((node) => node.dependents.length === 0)
  while (stack.length > 0) {
    const node = stack.pop()!
    let longest = 0
    for (const dependent of node.dependents) longest = Math.max(longest, dependent.priority)
    node.priority = node.estimateMs + longest
    for (const dep of node.deps) if (--remaining[dep.index]! === 0) stack.push(dep)
  }
}

/** `prioritize` for nodes that each come after all their dependencies: last to first, no counts or stack. */
const prioritizeBackward = (nodes: ReadonlyArray<Node>): void => {
  for (let i = nodes.length - 1; i >= 0; i--) {
    const node = nodes[i]!
    let longest = 0
    const dependents = node.dependents
    for (let d = 0; d < dependents.length; d++) if (dependents[d]!.priority > longest) longest = dependents[d]!.priority
    node.priority = node.estimateMs + longest
  }
}

/**
 * A time every outcome of a run may hold (the run's start, or a clock reading), kept in a field
 * that has held `undefined`: V8 then stores a number there as a pointer to its heap box, not as a
 * double of its own, so every reader gets that one box. Epoch milliseconds are beyond the small
 * integers V8 stores unboxed, so each time an outcome holds costs a 16-byte object that lives until
 * the run returns (and is copied by the young-generation collector) unless it is shared: agents
 * queued at the run's start share its box, agents that start or end in the same millisecond share
 * that reading's.
 */
export class Times {
  value: number | undefined = undefined
}

/** What `Compact` holds for an agent (its `kinds` entry). Queued: no node yet. */
const queued = 0
/** Taken from the queue: `slots` holds its node. */
const live = 1
/** Succeeded in one attempt without usage: `slots` holds its value, `times` when it started and ended. */
const compactSucceeded = 2
/** Ended otherwise: `slots` holds its outcome. */
const ended = 3

/**
 * The agents of a compact run: no ledger, no events, and either every agent plain (see
 * `plainNode`) or every node made before the run with no dependencies and one priority (a claims
 * run, `ofNodes`). Plain agents get no node until they are taken from the ready queue (`make`); in
 * both, the run refers to the node only until the agent ends; fibers the agent forked keep theirs
 * for as long as they live.
 * An agent that succeeded in one attempt without usage leaves its value and two times in arrays,
 * and its `Succeeded` outcome is built when the run returns. At 100k+ agents the node and the
 * outcome, alive until the run returned, were most of what the young-generation collector copied
 * besides the caller's own agents.
 */
export class Compact {
  readonly agents: ReadonlyArray<Agent.Any>
  private readonly kinds: Uint8Array
  private readonly slots: Array<unknown>
  /** When each agent started and ended (`compactSucceeded`), two per agent. */
  private readonly times: Float64Array

  constructor(agents: ReadonlyArray<Agent.Any>, nodes?: Array<Node>) {
    this.agents = agents
    this.kinds = new Uint8Array(agents.length)
    this.times = new Float64Array(2 * agents.length)
    if (nodes === undefined) this.slots = new Array(agents.length).fill(undefined)
    else {
      this.kinds.fill(live)
      this.slots = nodes
    }
  }

  /**
   * The store of a run whose nodes were made before it started (a claims run): it takes `nodes`,
   * which no one else may hold, and overwrites each node's entry with its outcome when it ends.
   */
  static ofNodes(nodes: Array<Node>): Compact {
    const agents: Array<Agent.Any> = new Array(nodes.length)
    for (let index = 0; index < nodes.length; index++) agents[index] = nodes[index]!.agent
    return new Compact(agents, nodes)
  }

  /** The node of the agent at `index`, made now when it has none (`ready`, bound to `host`). */
  node(index: number, host: NodeHost): Node | undefined {
    const kind = this.kinds[index]
    if (kind === live) return this.slots[index] as Node
    if (kind !== queued) return undefined
    const node = plainNode(index, this.agents[index]!)
    node.host = host
    node.state = "ready"
    this.kinds[index] = live
    this.slots[index] = node
    return node
  }

  /** The nodes of agents that have not ended (taken from the queue, or made before the run). */
  live(): Array<Node> {
    const nodes: Array<Node> = []
    for (let index = 0; index < this.kinds.length; index++) {
      if (this.kinds[index] === live) nodes.push(this.slots[index] as Node)
    }
    return nodes
  }

  /** Keeps the agent's outcome; the run no longer refers to its node. */
  ended(index: number, outcome: Outcome.Outcome): void {
    this.kinds[index] = ended
    this.slots[index] = outcome
  }

  /** Keeps what the `Succeeded` outcome of an agent that ran once without usage is built from. */
  succeeded(node: Node, value: unknown, endedAt: number): void {
    const index = node.index
    this.kinds[index] = compactSucceeded
    this.slots[index] = value
    this.times[2 * index] = node.startedAt!
    this.times[2 * index + 1] = endedAt
  }

  /** The outcome of an ended agent. */
  outcome(index: number, queuedAt: number): Outcome.Outcome {
    if (this.kinds[index] === ended) return this.slots[index] as Outcome.Outcome
    const times = this.times
    return succeededAt(this.agents[index]!.id, queuedAt, times[2 * index]!, times[2 * index + 1]!, this.slots[index])
  }

  /** Every agent's outcome, in input order (each agent ended); times in the same millisecond share one box. */
  outcomes(queuedAt: number): Array<Outcome.Outcome> {
    const outcomes: Array<Outcome.Outcome> = new Array(this.kinds.length)
    const startedBox = new Times()
    const endedBox = new Times()
    const times = this.times
    for (let index = 0; index < outcomes.length; index++) {
      if (this.kinds[index] !== compactSucceeded) {
        outcomes[index] = this.slots[index] as Outcome.Outcome
        continue
      }
      const startedAt = times[2 * index]!
      const endedAt = times[2 * index + 1]!
      if (startedBox.value !== startedAt) startedBox.value = startedAt
      if (endedBox.value !== endedAt) endedBox.value = endedAt === startedAt ? startedBox.value : endedAt
      outcomes[index] = succeededAt(
        this.agents[index]!.id,
        queuedAt,
        startedBox.value,
        endedBox.value!,
        this.slots[index]
      )
    }
    return outcomes
  }
}
