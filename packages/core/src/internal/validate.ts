import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Agent from "../Agent.ts"
import * as Claims from "../Claims.ts"
import { InvalidRun, type Issue } from "../CorralError.ts"
import { describe } from "./describe.ts"
import { millis, wholeMillis } from "../DurationOption.ts"
import { checkNested, type Held } from "./inherit.ts"
import { Node, plainNode } from "./node.ts"

export interface RunSettings {
  readonly concurrency: number
  readonly pools: Readonly<Record<string, number>>
  readonly claimTimeout: Duration.Input | undefined
  /** `<runId>/` for a run with an id (given, or drawn for pools or tracing), else `""`. */
  readonly poolScope: string
  readonly rateLimits?: ReadonlyArray<string> | undefined
  readonly issues?: ReadonlyArray<Issue> | undefined
  readonly held?: Held | undefined
  readonly eventBuffer?: number | undefined
  readonly budget?: { readonly costUsd?: number | undefined; readonly tokens?: number | undefined } | undefined
  readonly maxBypass?: number | undefined
  readonly mode?: unknown
  readonly onEvent?: unknown
  readonly stopOn?: unknown
}

/** The pools of a run that names none: checking them is skipped. */
export const noPools: Readonly<Record<string, number>> = Object.freeze({})

/**
 * The nodes of a valid run. With `deferPlain`, a run whose agents are all plain gets `undefined`
 * instead: no node is made before its agent starts (see `Compact`).
 */
export function validate(
  agents: ReadonlyArray<Agent.Any>,
  settings: RunSettings
): Result.Result<ReadonlyArray<Node>, InvalidRun>
export function validate(
  agents: ReadonlyArray<Agent.Any>,
  settings: RunSettings,
  deferPlain: true
): Result.Result<ReadonlyArray<Node> | undefined, InvalidRun>
export function validate(
  agents: ReadonlyArray<Agent.Any>,
  settings: RunSettings,
  deferPlain = false
): Result.Result<ReadonlyArray<Node> | undefined, InvalidRun> {
  const given = settings.issues
  const issues: Array<Issue> = given === undefined || given.length === 0 ? [] : [...given]
  if (!Array.isArray(agents)) {
    issues.push({ field: "agents", message: `expected an array of agents, got ${describe(agents)}` })
    return Result.fail(new InvalidRun({ issues }))
  }
  checkSettings(settings, issues)
  const ids = checkIds(agents, issues)
  let nodes: Array<Node> | undefined
  let reporter: Reporter | undefined
  const claimTimeoutMs = runMillis(settings.claimTimeout)
  let graph = false
  // Every dependency listed before its dependent: no cycle is possible, so none is looked for.
  let backward = true
  for (let index = 0; index < agents.length; index++) {
    const agent = agents[index]!
    if (!Agent.isAgent(agent)) continue
    checkWork(agent, index, issues)
    if (isPlain(agent)) {
      if (nodes !== undefined || !deferPlain) (nodes ??= []).push(plainNode(index, agent))
      continue
    }
    if (nodes === undefined) nodes = plainNodes(agents, index)
    reporter ??= new Reporter(issues)
    reporter.agent = agent
    reporter.index = index
    const node = checkAgent(agents, reporter, ids, settings, claimTimeoutMs)
    if (node === undefined) continue
    nodes.push(node)
    if (node.depIndices.length > 0) {
      graph = true
      if (backward && !dependsBackward(node)) backward = false
    }
  }
  if (issues.length > 0) return Result.fail(new InvalidRun({ issues }))
  if (nodes !== undefined && graph && !backward) checkCycles(nodes, issues)
  if (issues.length > 0) return Result.fail(new InvalidRun({ issues }))
  return Result.succeed(nodes ?? (deferPlain && agents.length > 0 ? undefined : []))
}

const dependsBackward = (node: Node): boolean => {
  const deps = node.depIndices
  for (let i = 0; i < deps.length; i++) if (deps[i]! >= node.index) return false
  return true
}

/** The nodes of the agents before `end`, all plain and valid (the first agents of a run with deferred nodes). */
const plainNodes = (agents: ReadonlyArray<Agent.Any>, end: number): Array<Node> => {
  const nodes: Array<Node> = []
  for (let index = 0; index < end; index++) {
    const agent = agents[index]!
    if (Agent.isAgent(agent)) nodes.push(plainNode(index, agent))
  }
  return nodes
}

const checkSettings = (settings: RunSettings, issues: Array<Issue>): void => {
  const scope = settings.poolScope
  if (scope.length > 0 && isBlank(scope.slice(0, -1))) {
    issues.push({ field: "runId", message: `must not be blank, got ${JSON.stringify(scope.slice(0, -1))}` })
  }
  if (!Number.isInteger(settings.concurrency) || settings.concurrency < 1) {
    issues.push({ field: "concurrency", message: `must be an integer of at least 1, got ${settings.concurrency}` })
  }
  if (settings.pools !== noPools) {
    for (const [pool, capacity] of Object.entries(settings.pools)) {
      if (!Number.isInteger(capacity) || capacity < 1) {
        issues.push({ field: `pools.${pool}`, message: `capacity must be a positive integer, got ${capacity}` })
      }
    }
  }
  const eventBuffer = settings.eventBuffer
  if (eventBuffer !== undefined && (!Number.isInteger(eventBuffer) || eventBuffer < 1)) {
    issues.push({ field: "eventBuffer", message: `must be an integer of at least 1, got ${eventBuffer}` })
  }
  if (settings.claimTimeout !== undefined) {
    const claimTimeout = millis(settings.claimTimeout)
    if (Result.isFailure(claimTimeout)) issues.push({ field: "claimTimeout", message: claimTimeout.failure })
  }
  const budget = settings.budget
  if (budget !== undefined) {
    checkLimit(budget.costUsd, "costUsd", issues)
    checkLimit(budget.tokens, "tokens", issues)
  }
  const mode = settings.mode
  if (mode !== undefined && mode !== "settle" && mode !== "fail-fast") {
    issues.push({ field: "mode", message: `expected "settle" or "fail-fast", got ${JSON.stringify(mode)}` })
  }
  if (settings.onEvent !== undefined && typeof settings.onEvent !== "function") {
    issues.push({
      field: "onEvent",
      message: `expected a function returning an effect, got ${describe(settings.onEvent)}`
    })
  }
  if (settings.stopOn !== undefined && !Effect.isEffect(settings.stopOn)) {
    issues.push({ field: "stopOn", message: `expected an effect, got ${describe(settings.stopOn)}` })
  }
  const maxBypass = settings.maxBypass
  if (maxBypass !== undefined && maxBypass !== Infinity && (!Number.isInteger(maxBypass) || maxBypass < 0)) {
    issues.push({ field: "maxBypass", message: `must be a whole number of at least 0 or Infinity, got ${maxBypass}` })
  }
}

const checkLimit = (limit: number | undefined, field: string, issues: Array<Issue>): void => {
  if (limit !== undefined && !(limit > 0)) {
    issues.push({ field: `budget.${field}`, message: `must be a positive number, got ${limit}` })
  }
}

interface Ids {
  index: Map<string, number> | undefined
}

/**
 * Checks every entry is an agent with a usable, unique id. The usual valid run is confirmed on a
 * sorted copy of the ids: at 100k+ agents, inserting every id into a `Set` cost several times the
 * sort (hash-table growth and cache misses). A run with dependencies needs the index of its ids
 * anyway (`indexOf`): it is confirmed on that index instead, built here, with no sort. Only when
 * either finds a fault does the exact pass run, which names every fault in input order.
 */
const checkIds = (agents: ReadonlyArray<Agent.Any>, issues: Array<Issue>): Ids => {
  const ids: Ids = { index: undefined }
  if (!idsAreValid(agents, ids)) reportIds(agents, issues)
  return ids
}

/** Up to this many agents, ids are compared pairwise: no copy and no sort for small (nested) runs. */
const pairwiseMax = 16

const idsAreValid = (agents: ReadonlyArray<Agent.Any>, ids: Ids): boolean => {
  if (agents.length <= pairwiseMax) return smallIdsAreValid(agents)
  const keys: Array<string> = new Array(agents.length)
  let graph = false
  for (let index = 0; index < agents.length; index++) {
    const agent = agents[index]!
    if (!Agent.isAgent(agent)) return false
    const id = agent.id
    if (typeof id !== "string" || isBlank(id)) return false
    keys[index] = id
    if (!graph && agent.dependsOn.length > 0) graph = true
  }
  return graph ? indexIsUnique(keys, ids) : sortedAreUnique(keys)
}

const sortedAreUnique = (keys: Array<string>): boolean => {
  keys.sort()
  for (let i = 1; i < keys.length; i++) if (keys[i] === keys[i - 1]) return false
  return true
}

/** Whether the ids are distinct, by indexing them as `indexOf` does; keeps the index when they are. */
const indexIsUnique = (keys: ReadonlyArray<string>, ids: Ids): boolean => {
  const index = new Map<string, number>()
  for (let i = keys.length - 1; i >= 0; i--) index.set(keys[i]!, i)
  if (index.size !== keys.length) return false
  ids.index = index
  return true
}

const smallIdsAreValid = (agents: ReadonlyArray<Agent.Any>): boolean => {
  for (let index = 0; index < agents.length; index++) {
    const agent = agents[index]!
    if (!Agent.isAgent(agent)) return false
    const id = agent.id
    if (typeof id !== "string" || isBlank(id)) return false
    for (let other = 0; other < index; other++) if (agents[other]!.id === id) return false
  }
  return true
}

const reportIds = (agents: ReadonlyArray<Agent.Any>, issues: Array<Issue>): void => {
  const seen = new Set<string>()
  for (let index = 0; index < agents.length; index++) {
    const agent = agents[index]!
    if (!Agent.isAgent(agent)) {
      issues.push({ index, field: "", message: `expected an agent built with Agent.make, got ${describe(agent)}` })
      continue
    }
    const id: unknown = agent.id
    if (typeof id !== "string") {
      issues.push({ index, field: "id", message: `expected a string, got ${describe(id)}` })
      continue
    }
    if (isBlank(id)) {
      issues.push({ index, field: "id", message: "agent ids must not be blank" })
      continue
    }
    const size = seen.size
    seen.add(id)
    if (seen.size === size) {
      const first = agents.findIndex((other) => Agent.isAgent(other) && other.id === id)
      issues.push({ agentId: id, index, field: "id", message: `duplicate id: agents[${first}] already uses it` })
    }
  }
}

const indexOf = (agents: ReadonlyArray<Agent.Any>, ids: Ids): Map<string, number> => {
  if (ids.index !== undefined) return ids.index
  const index = new Map<string, number>()
  for (let i = agents.length - 1; i >= 0; i--) {
    const agent = agents[i]!
    if (Agent.isAgent(agent) && typeof agent.id === "string") index.set(agent.id, i)
  }
  return (ids.index = index)
}

/** `run` and `retry`, which plain agents have too: of the wrong kind, they would fail only once running. */
const checkWork = (agent: Agent.Any, index: number, issues: Array<Issue>): void => {
  const run = Agent.runProblem(agent)
  if (run !== undefined) {
    const message = `expected an effect or a function returning one, got ${run}`
    issues.push({ agentId: agent.id, index, field: "run", message })
  }
  const retry = agent.retry
  if (retry !== undefined && !Schedule.isSchedule(retry)) {
    issues.push({ agentId: agent.id, index, field: "retry", message: `expected a Schedule, got ${describe(retry)}` })
  }
}

const isPlain = (agent: Agent.Any): boolean =>
  agent.timeout === undefined &&
  agent.claimTimeout === undefined &&
  agent.estimate === undefined &&
  agent.claims === undefined &&
  agent.dependsOn.length === 0 &&
  agent.rateLimit === undefined

const isBlank = (id: string): boolean =>
  id.length === 0 || ((id.charCodeAt(0) <= 32 || id.charCodeAt(id.length - 1) <= 32) && id.trim().length === 0)

/**
 * Where the issues of the agent being checked go: one per run, moved from agent to agent, so that
 * checking a valid agent allocates nothing to report with.
 */
class Reporter {
  agent: Agent.Any | undefined = undefined
  index = 0
  readonly issues: Array<Issue>

  constructor(issues: Array<Issue>) {
    this.issues = issues
  }

  report(field: string, message: string): void {
    this.issues.push({ agentId: this.agent!.id, index: this.index, field, message })
  }
}

const checkAgent = (
  agents: ReadonlyArray<Agent.Any>,
  reporter: Reporter,
  ids: Ids,
  settings: RunSettings,
  runClaimTimeoutMs: number | undefined
): Node | undefined => {
  const agent = reporter.agent!
  const issues = reporter.issues
  const before = issues.length
  const timeoutMs = duration("timeout", agent.timeout, reporter)
  const claimTimeoutMs =
    agent.claimTimeout === undefined ? runClaimTimeoutMs : duration("claimTimeout", agent.claimTimeout, reporter)
  const estimateMs = duration("estimate", agent.estimate, reporter)
  let request: Claims.Request | undefined
  if (agent.claims !== undefined && claimsHaveShape(agent.claims, reporter)) {
    const normalized = Claims.toRequest(agent.claims, settings.pools, settings.poolScope)
    if (normalized instanceof Claims.InvalidClaim) reportClaims(agent.claims, settings, reporter)
    else if (!Claims.isEmpty(normalized)) request = normalized
    if (request !== undefined && settings.held !== undefined) checkNested(agent.id, request, settings.held, issues)
  }
  const deps = depIndices(agents, agent, ids, reporter)
  if (agent.rateLimit !== undefined) checkRateLimit(agent.rateLimit, settings.rateLimits, reporter)
  if (issues.length > before) return undefined
  return new Node(reporter.index, agent, request, timeoutMs, claimTimeoutMs, estimateMs ?? 1, deps)
}

/** An agent's duration in milliseconds, `undefined` when not given, or reported when invalid. */
const duration = (field: string, input: Duration.Input | undefined, reporter: Reporter): number | undefined => {
  if (input === undefined) return undefined
  const whole = wholeMillis(input)
  if (whole !== undefined) return whole
  const result = millis(input)
  if (Result.isFailure(result)) return void reporter.report(field, result.failure)
  return result.success
}

/** The run's own duration (`checkSettings` reports it once if it is invalid, not for every agent). */
const runMillis = (input: Duration.Input | undefined): number | undefined => {
  const result = millis(input)
  return Result.isSuccess(result) ? result.success : undefined
}

/** Up to this many, duplicate dependencies are found pairwise rather than with a `Set`. */
const pairwiseDeps = 8

/** The indices of an agent's dependencies, each once, in the order first named. */
const depIndices = (
  agents: ReadonlyArray<Agent.Any>,
  agent: Agent.Any,
  ids: Ids,
  reporter: Reporter
): ReadonlyArray<number> => {
  const dependsOn = agent.dependsOn
  if (!Array.isArray(dependsOn)) {
    reporter.report("dependsOn", `expected an array of agent ids, got ${describe(dependsOn)}`)
    return noDeps
  }
  if (dependsOn.length === 0) return noDeps
  const index = indexOf(agents, ids)
  const distinct = dependsOn.length <= pairwiseDeps ? dependsOn : [...new Set(dependsOn)]
  const deps: Array<number> = new Array(distinct.length)
  let count = 0
  for (let i = 0; i < distinct.length; i++) {
    const dep = distinct[i]!
    if (distinct === dependsOn && dependsOn.indexOf(dep) < i) continue
    const target = index.get(dep)
    if (dep === agent.id) reporter.report("dependsOn", "an agent cannot depend on itself")
    else if (target === undefined) reporter.report("dependsOn", `unknown agent ${JSON.stringify(dep)}`)
    else deps[count++] = target
  }
  if (count < deps.length) deps.length = count
  return deps
}

const noDeps: ReadonlyArray<number> = []

/** Whether a claim set given by an untyped caller has the documented shape; reports each part that does not. */
const claimsHaveShape = (claims: Claims.Claims, reporter: Reporter): boolean => {
  if (typeof claims !== "object" || claims === null || Array.isArray(claims)) {
    reporter.report("claims", `expected an object, got ${describe(claims)}`)
    return false
  }
  const write = keysHaveShape(claims.write, "write", reporter)
  const read = keysHaveShape(claims.read, "read", reporter)
  const pools: unknown = claims.pools
  if (pools !== undefined && (typeof pools !== "object" || pools === null || Array.isArray(pools))) {
    reporter.report("claims.pools", `expected an object of pool amounts, got ${describe(pools)}`)
    return false
  }
  return write && read
}

/** One mode's keys: an array of strings (a hole is skipped, as `forEach` skips it), or reports what is not. */
const keysHaveShape = (keys: unknown, mode: "write" | "read", reporter: Reporter): boolean => {
  if (keys === undefined) return true
  if (!Array.isArray(keys)) {
    reporter.report(`claims.${mode}`, `expected an array of keys, got ${describe(keys)}`)
    return false
  }
  let shaped = true
  for (let i = 0; i < keys.length; i++) {
    const key: unknown = keys[i]
    if (typeof key === "string" || !(i in keys)) continue
    reporter.report(`claims.${mode}[${i}]`, `expected a string key, got ${describe(key)}`)
    shaped = false
  }
  return shaped
}

/** Every invalid key and pool of a claim set, each with its path (`claims.write[1]`, `claims.pools.gpu`). */
const reportClaims = (claims: Claims.Claims, settings: RunSettings, reporter: Reporter) => {
  for (const mode of ["write", "read"] as const) {
    ;(claims[mode] ?? []).forEach((key, i) => {
      const normalized = Claims.normalizeKey(key)
      if (Result.isFailure(normalized)) reporter.report(`claims.${mode}[${i}]`, normalized.failure.message)
    })
  }
  for (const [pool, amount] of Object.entries(claims.pools ?? {})) {
    const normalized = Claims.normalize({ pools: { [pool]: amount } }, settings.pools, settings.poolScope)
    if (Result.isFailure(normalized)) reporter.report(`claims.pools.${pool}`, normalized.failure.message)
  }
}

const checkRateLimit = (key: string, known: ReadonlyArray<string> | undefined, reporter: Reporter) => {
  if (known === undefined) {
    reporter.report(
      "rateLimit",
      `no rate limits are configured: set the run's rateLimits option or provide a RateLimiter`
    )
  } else if (!known.includes(key)) {
    reporter.report(
      "rateLimit",
      `unknown rate limit ${JSON.stringify(key)}${known.length === 0 ? "" : ` (known: ${known.join(", ")})`}`
    )
  }
}

const checkCycles = (specs: ReadonlyArray<Node>, issues: Array<Issue>): void => {
  const state = new Uint8Array(specs.length)
  const stack: Array<number> = []
  const visit = (i: number): boolean => {
    state[i] = 1
    stack.push(i)
    for (const dep of specs[i]!.depIndices) {
      if (state[dep] === 1) {
        const cycle = [...stack.slice(stack.indexOf(dep)), dep].map((j) => specs[j]!.agent.id)
        issues.push({
          agentId: specs[dep]!.agent.id,
          index: specs[dep]!.index,
          field: "dependsOn",
          message: `dependency cycle: ${cycle.join(" -> ")}`
        })
        return true
      }
      if (state[dep] === 0 && visit(dep)) return true
    }
    stack.pop()
    state[i] = 2
    return false
  }
  for (let i = 0; i < specs.length; i++) if (state[i] === 0 && visit(i)) return
}
