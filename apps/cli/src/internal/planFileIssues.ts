import * as SchemaIssue from "effect/SchemaIssue"
import type { PlanFileIssue } from "../PlanFile.ts"

/** Renders `["agents", 3, "claims", "write", 0]` as `agents[3].claims.write[0]`. */
export const renderPath = (path: ReadonlyArray<PropertyKey>): string =>
  path
    .map((segment, index) => {
      if (typeof segment === "number") return `[${segment}]`
      const key = String(segment)
      if (!/^[A-Za-z_$][\w$-]*$/.test(key)) return `[${JSON.stringify(key)}]`
      return index === 0 ? key : `.${key}`
    })
    .join("")

const uncapitalize = (message: string): string =>
  /^[A-Z][a-z]/.test(message) ? message.charAt(0).toLowerCase() + message.slice(1) : message

const knownFields = (issue: SchemaIssue.UnexpectedKey): string => {
  const ast = issue.ast
  const names = ast._tag === "Objects" ? ast.propertySignatures.map((p) => String(p.name)) : []
  return names.length === 0 ? "unknown field" : `unknown field; expected one of: ${names.join(", ")}`
}

const leafHook = (issue: SchemaIssue.Leaf): string => {
  if (issue._tag === "UnexpectedKey") return knownFields(issue)
  if (issue._tag === "MissingKey") return "missing required field"
  return uncapitalize(SchemaIssue.defaultLeafHook(issue))
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })

/** Flattens a schema issue tree into located plan file issues. */
export const fromSchemaIssue = (
  issue: SchemaIssue.Issue,
  lineOf: (path: ReadonlyArray<PropertyKey>) => number | undefined
): ReadonlyArray<PlanFileIssue> =>
  formatter(issue).issues.map((entry) => {
    const path = (entry.path ?? []).map((segment) =>
      typeof segment === "object" && segment !== null ? segment.key : segment
    )
    return withLine({ path: renderPath(path), message: uncapitalize(entry.message) }, lineOf(path))
  })

/** Attaches a line number when one is known. */
export const withLine = (issue: PlanFileIssue, line: number | undefined): PlanFileIssue =>
  line === undefined ? issue : { ...issue, line }

const agentIndex = /^agents\[(\d+)\]/

/** Names the agent an issue under `agents[N]` is about, when that agent has a string `id`. */
export const withAgent =
  (value: unknown) =>
  (issue: PlanFileIssue): PlanFileIssue => {
    const index = agentIndex.exec(issue.path)?.[1]
    if (index === undefined || typeof value !== "object" || value === null) return issue
    const agents: unknown = (value as { readonly agents?: unknown }).agents
    const agent: unknown = Array.isArray(agents) ? agents[Number(index)] : undefined
    const id: unknown =
      typeof agent === "object" && agent !== null ? (agent as { readonly id?: unknown }).id : undefined
    return typeof id === "string" ? { ...issue, agentId: id } : issue
  }
