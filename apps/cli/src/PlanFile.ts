/**
 * Loads a plan file: the YAML or JSON document that lists the agents of a `corral` run, their
 * commands, claims, dependencies and limits.
 *
 * Decoding checks the shape (unknown fields are errors), then the plan as a whole (ids,
 * dependencies, cycles, pools, rate limits), and reports every problem at once in one
 * {@link PlanFileError}.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as FileSystem from "effect/FileSystem"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { PlatformError } from "effect/PlatformError"
import { build } from "./internal/planFileBuild.ts"
import { check, toIssue } from "./internal/planFileCheck.ts"
import { fromSchemaIssue, withAgent, withLine } from "./internal/planFileIssues.ts"
import { PlanSchema } from "./internal/planFileSchema.ts"
import { parse, type Source } from "./internal/planFileSource.ts"

/**
 * The syntax of a plan file, chosen by extension: `.yaml`/`.yml` or `.json`.
 *
 * @since 0.1.0
 * @category models
 */
export type Format = "yaml" | "json"

/**
 * One problem in a plan file. `path` locates it (`agents[3].claims.write[0]`, or `line 4, column 7`
 * for a syntax error); `line` is the line of that path when it could be found; `agentId` is the `id`
 * of the agent under `agents[N]` the path is in, when that agent has a string `id`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanFileIssue {
  readonly path: string
  readonly message: string
  readonly line?: number
  readonly agentId?: string
}

/**
 * A plan file that cannot be read or decoded. `issues` lists every problem found.
 *
 * @since 0.1.0
 * @category errors
 */
export class PlanFileError extends Data.TaggedError("PlanFileError")<{
  readonly file: string
  readonly issues: ReadonlyArray<PlanFileIssue>
}> {
  override get message(): string {
    return this.issues.map((issue) => formatIssue(this.file, issue)).join("\n")
  }
}

const formatIssue = (file: string, issue: PlanFileIssue): string => {
  const at = issue.path.length > 0 ? `${issue.path}: ` : ""
  const where = [
    ...(issue.agentId === undefined ? [] : [`agent ${JSON.stringify(issue.agentId)}`]),
    ...(issue.line === undefined ? [] : [`line ${issue.line}`])
  ]
  return `${file}: ${at}${issue.message}${where.length === 0 ? "" : ` (${where.join(", ")})`}`
}

/**
 * Normalized claims of an agent: relative paths (`src/parser.ts`, `src/` for a folder) or named
 * resources (`db:users`), and amounts taken from the plan's pools.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentClaims {
  readonly read: ReadonlyArray<string>
  readonly write: ReadonlyArray<string>
  readonly pools: Readonly<Record<string, number>>
}

/**
 * Resource limits of one agent's process.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentLimits {
  readonly memoryMb: number | undefined
  readonly cpuSeconds: number | undefined
  readonly fileSizeMb: number | undefined
  readonly maxProcesses: number | undefined
  readonly nice: number | undefined
  readonly maxOutputBytes: number | undefined
  readonly maxResultBytes: number | undefined
  readonly maxUsageBytes: number | undefined
  readonly cpuPercent: number | undefined
  readonly diskMb: number | undefined
}

/**
 * The sandbox of one agent (`sandbox: true` or options), paths as written in the plan: absolute, or
 * relative to the repository.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentSandbox {
  readonly network: boolean | "loopback"
  readonly allow: {
    readonly read: ReadonlyArray<string>
    readonly write: ReadonlyArray<string>
    /** Ports of the host's 127.0.0.1 reachable with `network: loopback`. */
    readonly ports: ReadonlyArray<number>
  }
}

/**
 * `shared` (default): nothing changes. `per-agent`: each agent gets its own SQLite file
 * (`CORRAL_AGENT_DB`, `DATABASE_URL=file:…`) in its private folder.
 *
 * @since 0.1.0
 * @category models
 */
export type Database = "shared" | "per-agent"

/**
 * A named rate limit bucket: at most `limit` starts per `intervalMs`, with an optional `burst`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RateLimit {
  readonly limit: number
  readonly intervalMs: number
  readonly burst: number | undefined
}

/**
 * Plan-wide defaults; already applied to every agent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Defaults {
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly retries: number
  readonly sandbox: AgentSandbox | undefined
  readonly database: Database
}

/**
 * One agent of a plan, with defaults applied and durations in milliseconds. `hash` is the sha256
 * of its canonical definition, stable across runs (for idempotency keys).
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanAgent {
  readonly id: string
  /** The command, or for a coding agent the tool's name. */
  readonly run: string
  /** A built-in coding agent run instead of a command. */
  readonly use: "claude-code" | "codex" | undefined
  /** Written to a file named by `CORRAL_PROMPT_FILE` (a coding agent reads it on stdin). */
  readonly prompt: string | undefined
  /** A coding agent's `--model`. */
  readonly model: string | undefined
  /** Extra arguments for a coding agent's CLI. */
  readonly args: ReadonlyArray<string>
  readonly claims: AgentClaims
  readonly dependsOn: ReadonlyArray<string>
  readonly timeoutMs: number | undefined
  readonly claimTimeoutMs: number | undefined
  readonly retries: number
  readonly limits: AgentLimits
  /** Run the command in a bubblewrap sandbox; `undefined` for no sandbox. */
  readonly sandbox: AgentSandbox | undefined
  readonly database: Database
  readonly env: Readonly<Record<string, string>>
  /** Variables passed from corral's own environment (for example `OPENAI_BASE_URL`). */
  readonly passEnv: ReadonlyArray<string>
  /** Variables passed from corral's environment whose values are redacted in logs and events. */
  readonly secrets: ReadonlyArray<string>
  /** Pass corral's whole environment instead of a minimal one. */
  readonly inheritEnv: boolean
  /** Check out only the folders the agent claims or declares as inputs (plus top-level files). */
  readonly sparse: boolean
  /**
   * Run in an overlay workspace (Linux): the agent's folder is an overlay of a read-only snapshot of
   * its start commit shared by the run's agents, so nothing is checked out per agent. Not with
   * `sandbox` or `sparse`.
   */
  readonly overlay: boolean
  readonly inputs: ReadonlyArray<string>
  readonly rateLimit: string | undefined
  readonly estimateMs: number | undefined
  readonly labels: Readonly<Record<string, string>>
  readonly hash: string
}

/**
 * A decoded, checked plan. `hash` covers everything but `file`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  readonly file: string
  readonly version: 1
  readonly concurrency: number
  readonly mode: "settle" | "fail-fast"
  readonly isolation: "worktree" | "directory" | "none"
  readonly merge: "auto" | "none"
  /** How each agent's work lands on the integration branch (see docs/workspaces.md). */
  readonly history: "merge" | "squash" | "linear"
  /** Author of the commits corral writes; default: the repository's git identity. */
  readonly author: { readonly name: string; readonly email: string } | undefined
  /** Committer of the commits corral writes; default: the author. */
  readonly committer: { readonly name: string; readonly email: string } | undefined
  readonly pools: Readonly<Record<string, number>>
  readonly rateLimits: Readonly<Record<string, RateLimit>>
  /** Stop the run once the agents together spent more (tokens = input + output). */
  readonly budget: { readonly costUsd?: number | undefined; readonly tokens?: number | undefined }
  readonly defaults: Defaults
  readonly agents: ReadonlyArray<PlanAgent>
  readonly hash: string
}

/**
 * The format implied by a file name, or `undefined` for an unsupported extension.
 *
 * @since 0.1.0
 * @category parsing
 */
export const formatOf = (path: string): Format | undefined => {
  const lower = path.toLowerCase()
  if (lower.endsWith(".yaml") || lower.endsWith(".yml")) return "yaml"
  return lower.endsWith(".json") ? "json" : undefined
}

const decodeSource = (source: Source, file: string): Result.Result<Plan, ReadonlyArray<PlanFileIssue>> => {
  const decoded = Schema.decodeUnknownResult(PlanSchema)(source.value, {
    errors: "all",
    onExcessProperty: "error",
    reportInput: true
  })
  const named = withAgent(source.value)
  if (Result.isFailure(decoded)) return Result.fail(fromSchemaIssue(decoded.failure.issue, source.lineOf).map(named))
  const findings = check(decoded.success)
  if (findings.length > 0) {
    return Result.fail(findings.map((finding) => named(withLine(toIssue(finding), source.lineOf(finding.path)))))
  }
  return Result.succeed(build(decoded.success, file))
}

/**
 * Decodes plan text without touching the file system. `path` names the file in errors and in
 * `Plan.file`; `format` defaults to the one implied by `path`, else YAML.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as PlanFile from "./PlanFile.ts"
 *
 * const program = Effect.gen(function*() {
 *   const plan = yield* PlanFile.decode("agents: [{ id: a, run: echo hi }]", { path: "plan.yaml" })
 *   return plan.agents.map((agent) => agent.id)
 * })
 * ```
 * @since 0.1.0
 * @category decoding
 */
export const decode = (
  text: string,
  options: { readonly path: string; readonly format?: Format | undefined }
): Effect.Effect<Plan, PlanFileError> => {
  const format = options.format ?? formatOf(options.path) ?? "yaml"
  const result = Result.flatMap(parse(text, format), (source) => decodeSource(source, options.path))
  return Effect.fromResult(Result.mapError(result, (issues) => new PlanFileError({ file: options.path, issues })))
}

const readIssue = (error: PlatformError): PlanFileIssue => {
  const reason = error.reason
  if (reason._tag === "NotFound") return { path: "", message: "file not found" }
  if (reason._tag === "PermissionDenied") return { path: "", message: "permission denied" }
  return { path: "", message: `cannot read the file: ${reason.message}` }
}

/**
 * Reads and decodes a plan file (`.yaml`, `.yml` or `.json`).
 *
 * @example
 * ```ts
 * import { NodeServices } from "@effect/platform-node"
 * import { Effect } from "effect"
 * import * as PlanFile from "./PlanFile.ts"
 *
 * const program = Effect.gen(function*() {
 *   const plan = yield* PlanFile.load("plan.yaml").pipe(Effect.provide(NodeServices.layer))
 *   return plan.agents.length
 * })
 * ```
 * @since 0.1.0
 * @category decoding
 */
export const load = Effect.fn("PlanFile.load")(function* (path: string) {
  const format = formatOf(path)
  if (format === undefined) {
    return yield* new PlanFileError({
      file: path,
      issues: [{ path: "", message: "unsupported file extension; use .yaml, .yml or .json" }]
    })
  }
  const fs = yield* FileSystem.FileSystem
  const bytes = yield* fs
    .readFile(path)
    .pipe(Effect.mapError((error) => new PlanFileError({ file: path, issues: [readIssue(error)] })))
  const text = yield* Effect.fromResult(
    Result.mapError(utf8(bytes), (issue) => new PlanFileError({ file: path, issues: [issue] }))
  )
  return yield* decode(text, { path, format })
})

const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/** Plan files are UTF-8: an invalid byte is an error at its line, never a silent U+FFFD in a command. */
const utf8 = (bytes: Uint8Array): Result.Result<string, PlanFileIssue> => {
  try {
    return Result.succeed(strictUtf8.decode(bytes))
  } catch {
    let start = 0
    let line = 1
    while (start <= bytes.length) {
      const end = bytes.indexOf(0x0a, start)
      const stop = end === -1 ? bytes.length : end
      try {
        strictUtf8.decode(bytes.subarray(start, stop))
      } catch {
        return Result.fail({ path: "", message: "the file is not valid UTF-8 text", line })
      }
      start = stop + 1
      line++
    }
    return Result.fail({ path: "", message: "the file is not valid UTF-8 text" })
  }
}
