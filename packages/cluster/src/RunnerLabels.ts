/**
 * What a runner label may be, read from how labels are matched: an agent that requires a label is
 * sent to the entity `<runId>/<agentId>~<salt>#<label>`, whose shard group (`label:<label>`) is read
 * back from the id by splitting at `#` and `~`; `corral runner --labels` splits at `,` and trims,
 * and `corral runners` joins them with `,`; the registry and the coordinator's checks compare labels
 * exactly. So a label is not empty, has no space at either end, contains no `#`, `~` or `,`, and a
 * runner gives each label once (each is one shard group it joins).
 *
 * A module of its own that imports nothing, so that a program checking labels only (`corral
 * validate`) does not load the cluster's PostgreSQL and `effect/cluster` code.
 *
 * @since 0.1.0
 */

const problem = (label: string, seen: ReadonlySet<string>): string | undefined => {
  if (label === "") return `a label must not be empty, got ""`
  if (label.trim() !== label) return `a label must not begin or end with a space, got ${JSON.stringify(label)}`
  if (/[#~,]/.test(label)) return `a label must not contain "#", "~" or ",", got ${JSON.stringify(label)}`
  if (seen.has(label)) return `${JSON.stringify(label)} is given twice`
  return undefined
}

/**
 * Why `labels` cannot be a runner's labels, `undefined` when they can: the first label that is
 * empty, begins or ends with a space, contains `#`, `~` or `,`, or is given twice. The rule
 * `Runner.serve` and `Cluster.layerRunner` apply; an agent's `requires` label can be placed only
 * when `labelsProblem([requires])` is `undefined`.
 *
 * @example
 * ```ts
 * import * as RunnerLabels from "@corral/cluster/RunnerLabels"
 *
 * RunnerLabels.labelsProblem(["gpu", "linux"]) // undefined
 * RunnerLabels.labelsProblem(["gpu#1"]) // 'a label must not contain "#", "~" or ",", got "gpu#1"'
 * RunnerLabels.labelsProblem(["gpu", "gpu"]) // '"gpu" is given twice'
 * ```
 * @since 0.1.0
 * @category validation
 */
export const labelsProblem = (labels: ReadonlyArray<string>): string | undefined => {
  const seen = new Set<string>()
  for (const label of labels) {
    const reason = typeof label === "string" ? problem(label, seen) : `a label must be a string, got ${String(label)}`
    if (reason !== undefined) return reason
    seen.add(label)
  }
  return undefined
}
