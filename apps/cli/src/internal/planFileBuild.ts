import { createHash } from "node:crypto"
import type { AgentSandbox, Defaults, Plan, PlanAgent, RateLimit } from "../PlanFile.ts"
import type { RawAgent, RawPlan } from "./planFileSchema.ts"

const canonical = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonical)
  if (typeof value !== "object" || value === null) return value
  const entries = Object.entries(value)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return Object.fromEntries(entries.map(([k, v]) => [k, canonical(v)]))
}

/** sha256 (hex) of the canonical JSON of a value: object keys sorted, `undefined` fields dropped. */
export const hashOf = (value: unknown): string =>
  createHash("sha256")
    .update(JSON.stringify(canonical(value)))
    .digest("hex")

const unique = (items: ReadonlyArray<string> | undefined): ReadonlyArray<string> => [...new Set(items ?? [])]

const sandboxOf = (raw: NonNullable<RawAgent["sandbox"]>): AgentSandbox | undefined => {
  if (raw === false) return undefined
  if (raw === true) return { network: true, allow: { read: [], write: [], ports: [] } }
  return {
    network: raw.network ?? true,
    allow: {
      read: unique(raw.allow?.read),
      write: unique(raw.allow?.write),
      ports: [...new Set(raw.allow?.ports ?? [])]
    }
  }
}

const buildAgent = (agent: RawAgent, defaults: Defaults): PlanAgent => {
  const definition: Omit<PlanAgent, "hash"> = {
    id: agent.id,
    run: agent.run ?? agent.use ?? "",
    use: agent.use,
    prompt: agent.prompt,
    model: agent.model,
    args: [...(agent.args ?? [])],
    claims: {
      read: unique(agent.claims?.read),
      write: unique(agent.claims?.write),
      pools: { ...agent.claims?.pools }
    },
    dependsOn: unique(agent.dependsOn),
    timeoutMs: agent.timeout ?? defaults.timeoutMs,
    claimTimeoutMs: agent.claimTimeout ?? defaults.claimTimeoutMs,
    retries: agent.retries ?? defaults.retries,
    limits: {
      memoryMb: agent.limits?.memoryMb,
      cpuSeconds: agent.limits?.cpuSeconds,
      fileSizeMb: agent.limits?.fileSizeMb,
      maxProcesses: agent.limits?.maxProcesses,
      nice: agent.limits?.nice,
      maxOutputBytes: agent.limits?.maxOutputBytes,
      maxResultBytes: agent.limits?.maxResultBytes,
      maxUsageBytes: agent.limits?.maxUsageBytes,
      cpuPercent: agent.limits?.cpuPercent,
      diskMb: agent.limits?.diskMb
    },
    sandbox: agent.sandbox === undefined ? defaults.sandbox : sandboxOf(agent.sandbox),
    database: agent.database ?? defaults.database,
    env: { ...agent.env },
    passEnv: unique(agent.passEnv),
    secrets: unique(agent.secrets),
    inheritEnv: agent.inheritEnv ?? false,
    sparse: agent.sparse ?? false,
    overlay: agent.overlay ?? false,
    inputs: unique(agent.inputs),
    rateLimit: agent.rateLimit,
    estimateMs: agent.estimate,
    labels: { ...agent.labels }
  }
  // Fields added after hashes were first recorded count only when set, so cached results and
  // resumable runs of plans that do not use them keep their hashes.
  const { overlay, ...withoutOverlay } = definition
  const hashed = overlay ? definition : withoutOverlay
  const { args, ...rest } = hashed
  return { ...definition, hash: hashOf(args.length === 0 ? rest : hashed) }
}

const buildRateLimits = (plan: RawPlan): Readonly<Record<string, RateLimit>> =>
  Object.fromEntries(
    Object.entries(plan.rateLimits ?? {}).map(([name, limit]) => [
      name,
      { limit: limit.limit, intervalMs: limit.interval, burst: limit.burst }
    ])
  )

/** Applies defaults and computes the agent and plan hashes. */
export const build = (plan: RawPlan, file: string): Plan => {
  const defaults: Defaults = {
    timeoutMs: plan.defaults?.timeout,
    claimTimeoutMs: plan.defaults?.claimTimeout,
    retries: plan.defaults?.retries ?? 0,
    sandbox: plan.defaults?.sandbox === undefined ? undefined : sandboxOf(plan.defaults.sandbox),
    database: plan.defaults?.database ?? "shared"
  }
  const definition: Omit<Plan, "file" | "hash"> = {
    version: 1,
    concurrency: plan.concurrency ?? 4,
    mode: plan.mode ?? "settle",
    isolation: plan.isolation ?? "worktree",
    merge: plan.merge ?? "auto",
    history: plan.history ?? "merge",
    author: plan.author,
    committer: plan.committer,
    pools: { ...plan.pools },
    rateLimits: buildRateLimits(plan),
    budget: { costUsd: plan.budget?.costUsd, tokens: plan.budget?.tokens },
    defaults,
    agents: plan.agents.map((agent) => buildAgent(agent, defaults))
  }
  return { file, ...definition, hash: hashOf(definition) }
}
