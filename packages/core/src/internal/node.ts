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
  readonly locks: ResourceLocks.ResourceLocks["Service"]
  readonly held: Held | undefined
  readonly report: (node: Node, usage: Partial<Usage.Usage>) => boolean
}

/** State of an agent that waits for claims; allocated only for agents that ever wait. */
export class WaitState {
  bypassed = 0
  bypassMark = 0
  reserved = false
  intent = false
  timer = false
  blockingTokens: Set<number> | undefined = undefined
  tokenKey = ""
  describeBlockers: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined = undefined
  describeLocal: (() => ReadonlyArray<ResourceLocks.Blocker>) | undefined = undefined
}

export const waitOf = (node: Node): WaitState => (node.wait ??= new WaitState())

/** What validation settled about an agent and the run never changes: one shared object for plain agents. */
interface Spec {
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly estimateMs: number
  readonly depIndices: ReadonlyArray<number>
}

const noIndices: ReadonlyArray<number> = []

const plainSpec: Spec = { timeoutMs: undefined, claimTimeoutMs: undefined, estimateMs: 1, depIndices: noIndices }

/**
 * One agent of a run. It is also the agent's `Agent.Frame`: the run binds the node itself to the
 * agent's context, so binding costs no allocation. Every node lives until the run returns, so the
 * settings few agents have are in one `spec` object (shared by plain agents), and a dependency's
 * value is read from its outcome rather than kept twice.
 */
export class Node implements Agent.Frame {
  readonly index: number
  readonly agent: Agent.Any
  readonly id: string
  readonly request: Claims.Request | undefined
  private readonly spec: Spec
  deps: Array<Node> = noNodes
  dependents: Array<Node> = noNodes
  priority = 0
  depsLeft = 0
  state: NodeState = "waiting-deps"
  queuedAt = Number.NaN
  startedAt: number | undefined = undefined
  attempts = 0
  usage: Usage.Usage = Usage.zero
  lease: ResourceLocks.Lease | undefined = undefined
  /** The token of the agent's lease; kept after the lease is released, for fibers the agent forked. */
  fencingToken: number | undefined = undefined
  outcome: Outcome.Outcome | undefined = undefined
  rateTaken = false
  ledgerKey: string | undefined = undefined
  wait: WaitState | undefined = undefined
  host: NodeHost = detached

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
    this.id = agent.id
    this.request = request
    this.spec =
      timeoutMs === undefined && claimTimeoutMs === undefined && estimateMs === 1 && depIndices.length === 0
        ? plainSpec
        : { timeoutMs, claimTimeoutMs, estimateMs, depIndices }
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
  get locks(): never {
    throw new Error("corral: node used outside a run")
  },
  held: undefined,
  report: () => false
}

export const before = (a: Node, b: Node): boolean =>
  a.priority > b.priority || (a.priority === b.priority && a.index < b.index)

const noNodes: Array<Node> = []

export const link = (nodes: ReadonlyArray<Node>): void => {
  let graph = false
  for (const node of nodes) {
    if (node.depIndices.length === 0) continue
    graph = true
    for (const dep of node.depIndices) {
      const target = nodes[dep]!
      if (node.deps === noNodes) node.deps = []
      if (target.dependents === noNodes) target.dependents = []
      node.deps.push(target)
      target.dependents.push(node)
    }
    node.depsLeft = node.deps.length
  }
  if (graph) prioritize(nodes)
  else for (const node of nodes) node.priority = node.estimateMs
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
