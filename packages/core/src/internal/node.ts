import type * as Agent from "../Agent.ts"
import type * as Claims from "../Claims.ts"
import type * as Outcome from "../Outcome.ts"
import type * as ResourceLocks from "../ResourceLocks.ts"
import * as Usage from "../Usage.ts"
import { type Held, type Inherited, inheritLocks } from "./inherit.ts"
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
  /** The keys (`KeyTree` nodes) agents behind it took while it waited, and how often each (see `bypass`). */
  bypassKeys: Array<object> | undefined = undefined
  bypassCounts: Array<number> | undefined = undefined
  /** The grant that last counted each key, so a grant counts once per key. */
  bypassMarks: Array<number> | undefined = undefined
  bypassMark = 0
  /** The last walk over a token's waiters that met this agent (see `ClaimGate`). */
  visitMark = 0
  reserved = false
  intent = false
  timer = false
  /** The leases and reserved tokens it waits for, each once. */
  blockingTokens: Array<number> | undefined = undefined
  tokenKey = ""
  describeBlockers: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined = undefined
  describeLocal: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined = undefined
}

export const waitOf = (node: Node): WaitState => (node.wait ??= new WaitState())

/** What validation settled about an agent and the run never changes: one shared object for plain agents. */
interface Spec {
  readonly request: Claims.Request | undefined
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly estimateMs: number
  readonly depIndices: ReadonlyArray<number>
}

const noIndices: ReadonlyArray<number> = []

const plainSpec: Spec = {
  request: undefined,
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
 * agent's context, so binding costs no allocation. Every node lives until the run returns, and at
 * 100k+ agents the young-generation collector's copying of them is a large share of a run's CPU,
 * so a node keeps only what every agent uses in its own fields: the settings few agents have are
 * in one `spec` object (shared by plain agents), the state few agents have in an `Extra` created on
 * demand (read through accessors), a dependency's value is read from its outcome and the queue time
 * of an agent queued at the run's start is the run's.
 */
export class Node implements Agent.Frame {
  readonly index: number
  readonly agent: Agent.Any
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
    this.priority = estimateMs
    this.spec =
      request === undefined &&
      timeoutMs === undefined &&
      claimTimeoutMs === undefined &&
      estimateMs === 1 &&
      depIndices.length === 0
        ? plainSpec
        : { request, timeoutMs, claimTimeoutMs, estimateMs, depIndices }
  }

  get id(): string {
    return this.agent.id
  }

  /** The agent's claims, resolved. */
  get request(): Claims.Request | undefined {
    return this.spec.request
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

  /** What a run nested inside this agent inherits: the agent's claims and its run's lock service. */
  inherited(): Inherited {
    const host = this.host
    if (this.request === undefined) return { locks: host.locks, held: host.held }
    const held: Held = {
      holder: { runId: host.runId, agentId: this.id },
      request: this.request,
      outer: host.held,
      holds: () => this.lease !== undefined
    }
    return { locks: inheritLocks(host.locks, held), held }
  }
}

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

export const before = (a: Node, b: Node): boolean =>
  a.priority > b.priority || (a.priority === b.priority && a.index < b.index)

const noNodes: Array<Node> = []

/** Links the nodes of a run with dependencies to each other and orders them by critical path. */
export const link = (nodes: ReadonlyArray<Node>): void => {
  for (const node of nodes) {
    if (node.depIndices.length === 0) continue
    const deps: Array<Node> = []
    for (const dep of node.depIndices) {
      const target = nodes[dep]!
      if (target.dependents === noNodes) target.dependents = []
      deps.push(target)
      target.dependents.push(node)
    }
    node.deps = deps
    node.depsLeft = deps.length
  }
  prioritize(nodes)
}

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
