import type { PlanFileIssue } from "../PlanFile.ts"
import { renderPath } from "./planFileIssues.ts"
import type { RawAgent, RawPlan } from "./planFileSchema.ts"

type Path = ReadonlyArray<PropertyKey>

/** An issue found after schema decoding, still with a structured path. */
export interface Finding {
  readonly path: Path
  readonly message: string
}

const listNames = (names: ReadonlyArray<string>, none: string): string =>
  names.length === 0 ? none : names.map((name) => JSON.stringify(name)).join(", ")

const checkIds = (agents: ReadonlyArray<RawAgent>): Array<Finding> => {
  const firstIndex = new Map<string, number>()
  const findings: Array<Finding> = []
  agents.forEach((agent, index) => {
    const first = firstIndex.get(agent.id)
    if (first === undefined) firstIndex.set(agent.id, index)
    else {
      findings.push({
        path: ["agents", index, "id"],
        message: `duplicate id ${JSON.stringify(agent.id)}; agents[${first}] already uses it`
      })
    }
  })
  return findings
}

const checkDependencies = (agents: ReadonlyArray<RawAgent>): Array<Finding> => {
  const ids = agents.map((agent) => agent.id)
  const known = new Set(ids)
  return agents.flatMap((agent, index) =>
    (agent.dependsOn ?? []).flatMap((dependency, position): Array<Finding> => {
      const path = ["agents", index, "dependsOn", position]
      if (dependency === agent.id) return [{ path, message: `agent ${JSON.stringify(agent.id)} depends on itself` }]
      if (known.has(dependency)) return []
      return [
        {
          path,
          message: `unknown agent ${JSON.stringify(dependency)}; the plan's agents are ${listNames(ids, "none")}`
        }
      ]
    })
  )
}

const findCycles = (agents: ReadonlyArray<RawAgent>): Array<ReadonlyArray<string>> => {
  const edges = new Map(agents.map((agent) => [agent.id, (agent.dependsOn ?? []).filter((d) => d !== agent.id)]))
  const state = new Map<string, "active" | "done">()
  const stack: Array<string> = []
  const cycles: Array<ReadonlyArray<string>> = []
  const visit = (id: string): void => {
    state.set(id, "active")
    stack.push(id)
    for (const next of edges.get(id) ?? []) {
      if (!edges.has(next)) continue
      const seen = state.get(next)
      if (seen === "active") cycles.push([...stack.slice(stack.indexOf(next)), next])
      else if (seen === undefined) visit(next)
    }
    stack.pop()
    state.set(id, "done")
  }
  for (const id of edges.keys()) if (!state.has(id)) visit(id)
  return cycles
}

const checkCycles = (agents: ReadonlyArray<RawAgent>): Array<Finding> => {
  const indexOf = new Map(agents.map((agent, index) => [agent.id, index] as const))
  return findCycles(agents).map((cycle) => ({
    path: ["agents", indexOf.get(cycle[0]!)!, "dependsOn"],
    message: `dependency cycle: ${cycle.join(" -> ")}`
  }))
}

const checkPools = (plan: RawPlan): Array<Finding> => {
  const capacities = plan.pools ?? {}
  const configured = Object.keys(capacities)
  return plan.agents.flatMap((agent, index) =>
    Object.entries(agent.claims?.pools ?? {}).flatMap(([pool, amount]): Array<Finding> => {
      const path = ["agents", index, "claims", "pools", pool]
      const capacity = capacities[pool]
      if (capacity === undefined) {
        return [
          {
            path,
            message: `pool ${JSON.stringify(pool)} is not configured; configured pools: ${listNames(configured, "none")}`
          }
        ]
      }
      if (amount <= capacity) return []
      return [{ path, message: `asks for ${amount} but pool ${JSON.stringify(pool)} holds ${capacity}` }]
    })
  )
}

const checkRateLimits = (plan: RawPlan): Array<Finding> => {
  const buckets = Object.keys(plan.rateLimits ?? {})
  return plan.agents.flatMap(
    (agent, index): Array<Finding> =>
      agent.rateLimit === undefined || buckets.includes(agent.rateLimit)
        ? []
        : [
            {
              path: ["agents", index, "rateLimit"],
              message: `unknown rate limit ${JSON.stringify(agent.rateLimit)}; configured rate limits: ${listNames(buckets, "none")}`
            }
          ]
  )
}

/** Checks that need the whole plan: ids, dependencies, cycles, pools and rate limits. */
export const check = (plan: RawPlan): ReadonlyArray<Finding> => {
  const idFindings = checkIds(plan.agents)
  const dependencyFindings = checkDependencies(plan.agents)
  const cycleFindings = idFindings.length === 0 ? checkCycles(plan.agents) : []
  return [...idFindings, ...dependencyFindings, ...cycleFindings, ...checkPools(plan), ...checkRateLimits(plan)]
}

/** Renders a finding's path for a plan file issue. */
export const toIssue = (finding: Finding): PlanFileIssue => ({
  path: renderPath(finding.path),
  message: finding.message
})
