/**
 * What a runner label may be, read from how labels are matched: an agent that requires a label is
 * sent to the entity `<runId>/<agentId>~<salt>#<label>`, whose shard group (`label:<label>`) is read
 * back from the id by splitting at `#` and `~`; `corral runner --labels` splits at `,` and trims,
 * and `corral runners` joins them with `,`; the registry and the coordinator's checks compare labels
 * exactly. So a label is not empty, has no space at either end, contains no `#`, `~` or `,`, and a
 * runner gives each label once (each is one shard group it joins).
 */
import { PostgresOptions } from "@corral/postgres"
import * as Effect from "effect/Effect"

const problem = (label: string, seen: ReadonlySet<string>): string | undefined => {
  if (label === "") return `a label must not be empty, got ""`
  if (label.trim() !== label) return `a label must not begin or end with a space, got ${JSON.stringify(label)}`
  if (/[#~,]/.test(label)) return `a label must not contain "#", "~" or ",", got ${JSON.stringify(label)}`
  if (seen.has(label)) return `${JSON.stringify(label)} is given twice`
  return undefined
}

/** Why `labels` cannot be a runner's labels (the first malformed or repeated one), `undefined` when they can. */
export const labelsProblem = (labels: ReadonlyArray<string>): string | undefined => {
  const seen = new Set<string>()
  for (const label of labels) {
    const reason = typeof label === "string" ? problem(label, seen) : `a label must be a string, got ${String(label)}`
    if (reason !== undefined) return reason
    seen.add(label)
  }
  return undefined
}

/** `labels` when each is a valid label, given once; dies with `PostgresOptions.InvalidOption` naming `module` otherwise. */
export const checkLabels = (module: string, labels: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.suspend(() => {
    const reason = labelsProblem(labels)
    return reason === undefined
      ? Effect.succeed(labels)
      : Effect.die(new PostgresOptions.InvalidOption({ module, option: "labels", reason }))
  })
