import type * as Agent from "../Agent.ts"
import type * as Claims from "../Claims.ts"
import type * as Outcome from "../Outcome.ts"
import type * as ResourceLocks from "../ResourceLocks.ts"
import * as Usage from "../Usage.ts"
import type { Spec } from "./validate.ts"

export type NodeState = "waiting-deps" | "ready" | "parked" | "running" | "done"

export class Node {
  readonly index: number
  readonly agent: Agent.Any
  readonly id: string
  readonly request: Claims.Request | undefined
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly deps: Array<Node> = []
  readonly dependents: Array<Node> = []
  priority = 0
  depsLeft = 0
  state: NodeState = "waiting-deps"
  queuedAt = 0
  startedAt: number | undefined = undefined
  attempts = 0
  usage: Usage.Usage = Usage.zero
  lease: ResourceLocks.Lease | undefined = undefined
  value: unknown = undefined
  outcome: Outcome.Outcome | undefined = undefined
  bypassed = 0
  reserved = false
  intent = false
  waitingForClaims = false
  timer = false
  blockers: ReadonlyArray<ResourceLocks.Blocker> = []
  blockerText = ""

  constructor(spec: Spec) {
    this.index = spec.index
    this.agent = spec.agent
    this.id = spec.agent.id
    this.request = spec.request
    this.timeoutMs = spec.timeoutMs
    this.claimTimeoutMs = spec.claimTimeoutMs
    this.priority = spec.estimateMs
  }
}

export const before = (a: Node, b: Node): boolean => a.priority > b.priority || (a.priority === b.priority && a.index < b.index)

export const link = (nodes: ReadonlyArray<Node>, specs: ReadonlyArray<Spec>): void => {
  for (const spec of specs) {
    const node = nodes[spec.index]!
    for (const dep of spec.deps) {
      node.deps.push(nodes[dep]!)
      nodes[dep]!.dependents.push(node)
    }
    node.depsLeft = node.deps.length
  }
  prioritize(nodes, specs)
}

const prioritize = (nodes: ReadonlyArray<Node>, specs: ReadonlyArray<Spec>): void => {
  const remaining = nodes.map((node) => node.dependents.length)
  const stack = nodes.filter((node) => node.dependents.length === 0)
  while (stack.length > 0) {
    const node = stack.pop()!
    let longest = 0
    for (const dependent of node.dependents) longest = Math.max(longest, dependent.priority)
    node.priority = specs[node.index]!.estimateMs + longest
    for (const dep of node.deps) if (--remaining[dep.index]! === 0) stack.push(dep)
  }
}
