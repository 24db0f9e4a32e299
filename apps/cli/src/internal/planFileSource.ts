import * as Result from "effect/Result"
import {
  type Document,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseDocument,
  visit,
  type YAMLError
} from "yaml"
import type { Format, PlanFileIssue } from "../PlanFile.ts"

/** A parsed plan file: its value and a way to find the line of a path in it. */
export interface Source {
  readonly value: unknown
  readonly lineOf: (path: ReadonlyArray<PropertyKey>) => number | undefined
}

const positionPath = (line: number, column: number): string => `line ${line}, column ${column}`

const childOf = (node: unknown, segment: PropertyKey): { readonly node: unknown; readonly at: unknown } | undefined => {
  if (isSeq(node) && typeof segment === "number") {
    const item = node.items[segment]
    return item === undefined ? undefined : { node: item, at: item }
  }
  if (!isMap(node)) return undefined
  const pair = node.items.find(
    (item) => isPair(item) && isScalar(item.key) && String(item.key.value) === String(segment)
  )
  return pair === undefined ? undefined : { node: pair.value, at: pair.key }
}

const offsetOf = (node: unknown): number | undefined => (node as Node | null | undefined)?.range?.[0]

const locate = (root: unknown, path: ReadonlyArray<PropertyKey>): number | undefined => {
  let node = root
  let offset = offsetOf(root)
  for (const segment of path) {
    const child = childOf(node, segment)
    if (child === undefined) break
    offset = offsetOf(child.at) ?? offset
    node = child.node
  }
  return offset
}

const lineOfIn =
  (contents: unknown, lines: LineCounter): Source["lineOf"] =>
  (path) => {
    const offset = locate(contents, path)
    return offset === undefined ? undefined : lines.linePos(offset).line
  }

const yamlMessage = (message: string): string => message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")

const hints: Readonly<Record<string, string>> = {
  BLOCK_AS_IMPLICIT_KEY:
    'a plain value cannot contain ": "; quote it (run: "echo a: b") or use a block (run: |, the command on the next lines)'
}

/** Errors whose library wording names the library's API instead of the plan. */
const replacements: Readonly<Record<string, string>> = {
  MULTIPLE_DOCS: "a plan file holds one YAML document; remove the `---` and what follows, or put it in its own file"
}

const syntaxIssue = (error: YAMLError): PlanFileIssue => {
  const at = error.linePos?.[0]
  const hint = hints[error.code]
  const message = replacements[error.code] ?? yamlMessage(error.message)
  return {
    path: at ? positionPath(at.line, at.col) : "",
    message: hint === undefined ? message : `${message}; ${hint}`
  }
}

const unresolvedAliases = (doc: Document, lines: LineCounter): Array<PlanFileIssue> => {
  const issues: Array<PlanFileIssue> = []
  visit(doc, {
    Alias: (_key, alias) => {
      if (alias.resolve(doc) !== undefined) return
      const at = lines.linePos(alias.range?.[0] ?? 0)
      issues.push({
        path: positionPath(at.line, at.col),
        message: `unknown alias *${alias.source}; define the anchor &${alias.source} before it is used`
      })
    }
  })
  return issues
}

/**
 * Environment values are text: a number in an `env` map keeps the text it was written as (`3.10`,
 * `2.0`, `0x1F`), which YAML would otherwise read as the numbers 3.1, 2 and 31.
 */
const envNumbersAsWritten = (doc: Document, text: string): void => {
  visit(doc, {
    Pair: (_key, pair) => {
      if (!isScalar(pair.key) || pair.key.value !== "env" || !isMap(pair.value)) return
      for (const item of pair.value.items) {
        const value = item.value
        if (isScalar(value) && typeof value.value === "number" && value.range !== undefined && value.range !== null) {
          value.value = text.slice(value.range[0], value.range[1])
        }
      }
    }
  })
}

const parseYaml = (text: string): Result.Result<Source, ReadonlyArray<PlanFileIssue>> => {
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines, merge: true })
  if (doc.errors.length > 0) return Result.fail(doc.errors.map(syntaxIssue))
  const aliases = unresolvedAliases(doc, lines)
  if (aliases.length > 0) return Result.fail(aliases)
  envNumbersAsWritten(doc, text)
  return Result.try({
    try: () => ({ value: doc.toJS({ maxAliasCount: 100 }) as unknown, lineOf: lineOfIn(doc.contents, lines) }),
    catch: (error) => [{ path: "", message: error instanceof Error ? error.message : String(error) }]
  })
}

const endPosition = (text: string): string => {
  const lines = text.split("\n")
  return positionPath(lines.length, lines.at(-1)!.length + 1)
}

const jsonIssue = (text: string, error: unknown): PlanFileIssue => {
  const message = error instanceof Error ? error.message : String(error)
  const at = /\(line (\d+) column (\d+)\)$/.exec(message)
  return {
    path: at ? positionPath(Number(at[1]), Number(at[2])) : endPosition(text),
    message: message.replace(/ in JSON at position \d+.*$/, "").replace(/ \(line \d+ column \d+\)$/, "")
  }
}

const withJsonPositions = (text: string, value: unknown): Result.Result<Source, ReadonlyArray<PlanFileIssue>> => {
  const lines = new LineCounter()
  const doc = parseDocument(text, { lineCounter: lines })
  const duplicates = doc.errors.filter((error) => error.code === "DUPLICATE_KEY")
  if (duplicates.length > 0) return Result.fail(duplicates.map(syntaxIssue))
  return Result.succeed({ value, lineOf: lineOfIn(doc.contents, lines) })
}

const parseJson = (text: string): Result.Result<Source, ReadonlyArray<PlanFileIssue>> =>
  Result.flatMap(
    Result.try({ try: () => JSON.parse(text) as unknown, catch: (error) => [jsonIssue(text, error)] }),
    (value) => withJsonPositions(text, value)
  )

/** Parses plan text as YAML or JSON. Syntax errors are issues whose path is `line L, column C`. */
export const parse = (text: string, format: Format): Result.Result<Source, ReadonlyArray<PlanFileIssue>> =>
  format === "json" ? parseJson(text) : parseYaml(text)
