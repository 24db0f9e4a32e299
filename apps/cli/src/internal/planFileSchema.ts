import * as Claims from "@corral/core/Claims"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as SchemaAST from "effect/SchemaAST"
import * as SchemaIssue from "effect/SchemaIssue"
import * as SchemaTransformation from "effect/SchemaTransformation"

const units: ReadonlyArray<readonly [number, ReadonlyArray<string>]> = [
  [1, ["ms", "milli", "millis", "millisecond", "milliseconds"]],
  [1_000, ["s", "sec", "secs", "second", "seconds"]],
  [60_000, ["m", "min", "mins", "minute", "minutes"]],
  [3_600_000, ["h", "hr", "hrs", "hour", "hours"]],
  [86_400_000, ["d", "day", "days"]]
]

const unitMillis = new Map(units.flatMap(([ms, names]) => names.map((name) => [name, ms] as const)))

const durationText = /^(?:\d+(?:\.\d+)?\s*[a-z]+\s*)+$/
const durationParts = /(\d+(?:\.\d+)?)\s*([a-z]+)/g

const parseDurationString = (text: string): number | undefined => {
  const trimmed = text.trim().toLowerCase()
  if (/^\d+(?:\.\d+)?$/.test(trimmed)) return Number(trimmed)
  if (!durationText.test(trimmed)) return undefined
  let total = 0
  for (const [, amount, unit] of trimmed.matchAll(durationParts)) {
    const ms = unitMillis.get(unit!)
    if (ms === undefined) return undefined
    total += Number(amount) * ms
  }
  return total
}

/**
 * Parses `10m`, `1 minute`, `90s`, `2h`, `500ms`, `1h 30m` or a number of milliseconds.
 * Returns whole milliseconds, or `undefined` when the input is not a non-negative finite duration.
 */
export const parseDuration = (input: unknown): number | undefined => {
  const ms = typeof input === "number" ? input : typeof input === "string" ? parseDurationString(input) : undefined
  return ms !== undefined && Number.isFinite(ms) && ms >= 0 ? Math.round(ms) : undefined
}

const show = (input: unknown): string => (typeof input === "string" ? JSON.stringify(input) : String(input))

const durationIssue = (input: unknown, positive: boolean): string | undefined => {
  const ms = parseDuration(input)
  if (ms === undefined) {
    return typeof input === "number" && input < 0
      ? `expected a duration that is not negative, got ${input}`
      : `expected a duration like "90s", "10m", "1 minute" or a number of milliseconds, got ${show(input)}`
  }
  return positive && ms === 0 ? "expected a duration longer than zero, got 0" : undefined
}

const duration = (positive: boolean) =>
  Schema.Unknown.pipe(
    Schema.decodeTo(
      Schema.Number,
      SchemaTransformation.transformEffect({
        decode: (input: unknown, options) => {
          const message = durationIssue(input, positive)
          return message === undefined
            ? Effect.succeed(parseDuration(input)!)
            : Effect.fail(new SchemaIssue.InvalidValue({ message }, input, options))
        },
        encode: (ms: number) => Effect.succeed<unknown>(ms)
      })
    )
  )

/** A duration that may be zero, decoded to milliseconds. */
export const Duration = duration(false)

/** A duration longer than zero, decoded to milliseconds. */
export const PositiveDuration = duration(true)

const namedResource = /^[A-Za-z][A-Za-z0-9+._-]*:\S/

/**
 * Why a claimed path holding `*` or `?` is refused: a claim is taken literally, never as a pattern.
 * Whether the claim is a named resource is read from what the plan wrote (`raw`): `./db:x*` is a path.
 */
const patternReason = (raw: string, key: string, segments: ReadonlyArray<string>): string | undefined => {
  if (namedResource.test(raw.trim()) || !/[*?]/.test(key)) return undefined
  const folder = segments.slice(
    0,
    segments.findIndex((segment) => /[*?]/.test(segment))
  )
  const instead =
    folder.length === 0
      ? "name the files instead"
      : `claim their folder (${JSON.stringify(`${folder.join("/")}/`)}) instead`
  return `a claim is a path, not a pattern: "*" and "?" are taken literally, so it would not cover the files the pattern matches; ${instead}`
}

/**
 * Why a claim that reads as a named resource (`a:b/`, `db:users/orders`) is refused: a user may mean
 * the folder or file, which the library would take as a resource; `./a:b/` is the path.
 */
const ambiguityReason = (raw: string): string | undefined => {
  const trimmed = raw.trim()
  if (!namedResource.test(trimmed) || !/[\\/]/.test(trimmed)) return undefined
  return `it is ambiguous: a named resource holds no "/" or "\\" in a plan file, so write ${JSON.stringify(`./${trimmed}`)} for the path, or a resource name without them`
}

/**
 * Why a claim written like a named resource with a space after `:` (`db: x`) is refused: a path
 * rarely starts so, and the library would take it as the path `db: x`, not the resource `db:x`.
 */
const spacedReason = (raw: string): string | undefined => {
  const spaced = spacedResource.exec(raw.trim())
  if (spaced === null) return undefined
  const [, scheme, name] = spaced
  return `a named resource has no space after ":", so write ${JSON.stringify(`${scheme}:${name}`)} for the resource, or ${JSON.stringify(`./${raw.trim()}`)} for the path`
}

const spacedResource = /^([A-Za-z][A-Za-z0-9+._-]*):\s+(\S.*)$/

/** A key starting `name:`, which the library would read as a named resource, or refuse as one without a name. */
const resourcePrefix = /^[A-Za-z][A-Za-z0-9+._-]*:/

/**
 * The key a path claim keeps: `./` before one that starts like a named resource (`./a:b/`, `./db:`),
 * so it stays a path.
 */
const pathKey = (raw: string, key: string): string =>
  !namedResource.test(raw.trim()) && resourcePrefix.test(key) ? `./${key}` : key

const claimIssue = (raw: string, reason: string, options: SchemaAST.ParseOptions) =>
  new SchemaIssue.InvalidValue(
    { message: `expected a relative path or a named resource like "db:users", got ${JSON.stringify(raw)}; ${reason}` },
    raw,
    options
  )

/**
 * A claim key, decoded to its normalized form (`./src//a.ts` becomes `src/a.ts`; a path whose
 * normalized form would read as a named resource keeps `./`: `./a:b//` becomes `./a:b/`). A path
 * holding `*` or `?` is refused: a claim would take it literally. A claim that reads as a named
 * resource (`name:…`) and holds `/` or `\` is refused as ambiguous, as is one with a space after its
 * `:` (`db: x`); `./db:` is the file `db:`.
 */
export const ClaimKey = Schema.String.pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transformEffect({
      decode: (raw: string, options) =>
        Result.match(Claims.normalizeKey(raw), {
          onSuccess: ({ key, segments }) => {
            const reason = spacedReason(raw) ?? ambiguityReason(raw) ?? patternReason(raw, key, segments)
            return reason === undefined
              ? Effect.succeed(pathKey(raw, key))
              : Effect.fail(claimIssue(raw, reason, options))
          },
          onFailure: (error) => Effect.fail(claimIssue(raw, error.reason, options))
        }),
      encode: Effect.succeed
    })
  )
)

const relativePattern = Schema.String.check(
  Schema.makeFilter((pattern: string) =>
    pattern.startsWith("-")
      ? `expected a pattern that does not start with "-" (git would read it as an option), got ${JSON.stringify(pattern)}`
      : pattern.trim().length === 0 || pattern.startsWith("/") || /^[A-Za-z]:[\\/]/.test(pattern)
        ? `expected a relative glob pattern like "src/**/*.ts", got ${JSON.stringify(pattern)}`
        : pattern.split(/[\\/]/).includes("..")
          ? `expected a pattern inside the repository, got ${JSON.stringify(pattern)} (it escapes with "..")`
          : undefined
  )
)

/**
 * Ids become branch names, worktree folders and log file names: at most this many characters, the
 * longest agent id `Workspace.acquire` takes.
 */
export const maxIdLength = 64

const agentIdMessage = (id: string): string | undefined => {
  if (id.trim().length === 0) return "an agent id must not be blank"
  if (id.length > maxIdLength)
    return `expected an id of at most ${maxIdLength} characters (ids become branch, folder and log file names), got ${id.length}`
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id) || id.includes("..") || id.endsWith(".") || id.endsWith(".lock")) {
    return `expected an id of letters, digits, ".", "_" and "-" that starts with a letter or digit, with no "..", not ending in "." or ".lock" (ids become git branch names), got ${JSON.stringify(id)}`
  }
  if (id === "integration")
    return `"integration" is reserved: the run's integration branch is corral/<run-id>/integration`
  return undefined
}

const AgentId = Schema.String.check(Schema.makeFilter(agentIdMessage))

const EnvValue = Schema.Union([
  Schema.String.check(
    Schema.makeFilter((value: string) => (value.includes("\0") ? `a value ${nulMessage}` : undefined))
  ),
  Schema.Finite,
  Schema.Boolean
]).pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform<string, string | number | boolean>({ decode: String, encode: (s) => s })
  )
)

const envNameIssues = (env: Readonly<Record<string, string>>): Array<Schema.FilterIssue> =>
  Object.keys(env)
    .filter((name) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    .map((name) => ({
      path: [name],
      issue: `expected an environment variable name of letters, digits and "_", got ${JSON.stringify(name)}`
    }))

const Env = Schema.Record(Schema.String, EnvValue).check(Schema.makeFilter(envNameIssues))

const EnvName = Schema.String.check(
  Schema.makeFilter((name: string) =>
    /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)
      ? undefined
      : `expected an environment variable name of letters, digits and "_", got ${JSON.stringify(name)}`
  )
)

const nulMessage = "must not contain a NUL character (\\0); a process cannot receive it"

const Command = Schema.String.check(
  Schema.makeFilter((run: string) =>
    run.trim().length === 0
      ? "a command must not be blank"
      : run.includes("\0")
        ? `a command ${nulMessage}`
        : run.trimStart().startsWith("-")
          ? `a command must not start with "-" (sh -c would read it as an option), got ${JSON.stringify(run)}`
          : undefined
  )
)

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

const ClaimsSchema = Schema.Struct({
  read: Schema.optionalKey(Schema.Array(ClaimKey)),
  write: Schema.optionalKey(Schema.Array(ClaimKey)),
  pools: Schema.optionalKey(Schema.Record(Schema.String, PositiveInt))
})

const Niceness = Schema.Int.check(Schema.isBetween({ minimum: -20, maximum: 19 }))

/** The process limits of docs/limits.md: exactly the fields `ProcessRunner` enforces. */
export const LimitsSchema = Schema.Struct({
  memoryMb: Schema.optionalKey(PositiveInt),
  cpuSeconds: Schema.optionalKey(PositiveInt),
  fileSizeMb: Schema.optionalKey(PositiveInt),
  maxProcesses: Schema.optionalKey(PositiveInt),
  nice: Schema.optionalKey(Niceness),
  maxOutputBytes: Schema.optionalKey(PositiveInt),
  maxResultBytes: Schema.optionalKey(PositiveInt),
  maxUsageBytes: Schema.optionalKey(PositiveInt),
  cpuPercent: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  diskMb: Schema.optionalKey(PositiveInt)
})

const Prompt = Schema.String.check(
  Schema.makeFilter((prompt: string) => (prompt.trim().length === 0 ? "a prompt must not be blank" : undefined))
)

interface CommandFields {
  readonly run?: string | undefined
  readonly use?: string | undefined
  readonly prompt?: string | undefined
  readonly model?: string | undefined
  readonly args?: ReadonlyArray<string> | undefined
  readonly sparse?: boolean | undefined
  readonly overlay?: boolean | undefined
}

const commandIssues = (agent: CommandFields): Array<Schema.FilterIssue> => {
  if (agent.run !== undefined && agent.use !== undefined)
    return [{ path: ["use"], issue: "expected either `run` (a command) or `use` (a coding agent), not both" }]
  if (agent.run === undefined && agent.use === undefined)
    return [{ path: ["run"], issue: "expected `run` (a command) or `use` (claude-code or codex)" }]
  const issues: Array<Schema.FilterIssue> = []
  if (agent.use !== undefined && agent.prompt === undefined)
    issues.push({ path: ["prompt"], issue: `\`use: ${agent.use}\` needs a prompt` })
  if (agent.overlay === true && agent.sparse === true)
    issues.push({
      path: ["sparse"],
      issue: "`sparse` does not apply to an overlay workspace (nothing is checked out); set one of them"
    })
  for (const field of ["model", "args"] as const) {
    if (agent.use === undefined && agent[field] !== undefined)
      issues.push({ path: [field], issue: `\`${field}\` applies only to coding agents (\`use\`)` })
  }
  return issues
}

const SandboxPath = Schema.String.check(
  Schema.makeFilter((dir: string) =>
    dir.trim().length === 0 ? "expected a path (absolute, or relative to the repository)" : undefined
  )
)

const Port = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65535 }))

const portsNeedLoopback = (sandbox: {
  readonly network?: boolean | "loopback"
  readonly allow?: { readonly ports?: ReadonlyArray<number> }
}): Schema.FilterIssue | undefined =>
  (sandbox.allow?.ports ?? []).length > 0 && sandbox.network !== "loopback"
    ? { path: ["allow", "ports"], issue: "ports are reachable only with network: loopback" }
    : undefined

const SandboxSchema = Schema.Union([
  Schema.Boolean,
  Schema.Struct({
    network: Schema.optionalKey(Schema.Union([Schema.Boolean, Schema.Literal("loopback")])),
    allow: Schema.optionalKey(
      Schema.Struct({
        read: Schema.optionalKey(Schema.Array(SandboxPath)),
        write: Schema.optionalKey(Schema.Array(SandboxPath)),
        ports: Schema.optionalKey(Schema.Array(Port))
      })
    )
  }).check(Schema.makeFilter(portsNeedLoopback))
])

const DatabaseSchema = Schema.Literals(["shared", "per-agent"])

const AgentSchema = Schema.Struct({
  id: AgentId,
  run: Schema.optionalKey(Command),
  use: Schema.optionalKey(Schema.Literals(["claude-code", "codex"])),
  prompt: Schema.optionalKey(Prompt),
  model: Schema.optionalKey(Schema.String),
  args: Schema.optionalKey(Schema.Array(Schema.String)),
  claims: Schema.optionalKey(ClaimsSchema),
  dependsOn: Schema.optionalKey(Schema.Array(Schema.String)),
  timeout: Schema.optionalKey(PositiveDuration),
  claimTimeout: Schema.optionalKey(PositiveDuration),
  retries: Schema.optionalKey(Count),
  limits: Schema.optionalKey(LimitsSchema),
  sandbox: Schema.optionalKey(SandboxSchema),
  database: Schema.optionalKey(DatabaseSchema),
  env: Schema.optionalKey(Env),
  passEnv: Schema.optionalKey(Schema.Array(EnvName)),
  secrets: Schema.optionalKey(Schema.Array(EnvName)),
  inheritEnv: Schema.optionalKey(Schema.Boolean),
  sparse: Schema.optionalKey(Schema.Boolean),
  overlay: Schema.optionalKey(Schema.Boolean),
  inputs: Schema.optionalKey(Schema.Array(relativePattern)),
  rateLimit: Schema.optionalKey(Schema.String),
  estimate: Schema.optionalKey(Duration),
  labels: Schema.optionalKey(Schema.Record(Schema.String, EnvValue))
}).check(Schema.makeFilter(commandIssues))

const RateLimitSchema = Schema.Struct({
  limit: PositiveInt,
  interval: PositiveDuration,
  burst: Schema.optionalKey(Count)
})

const BudgetSchema = Schema.Struct({
  costUsd: Schema.optionalKey(Schema.Finite.check(Schema.isGreaterThan(0))),
  tokens: Schema.optionalKey(PositiveInt)
})

const DefaultsSchema = Schema.Struct({
  timeout: Schema.optionalKey(PositiveDuration),
  claimTimeout: Schema.optionalKey(PositiveDuration),
  retries: Schema.optionalKey(Count),
  sandbox: Schema.optionalKey(SandboxSchema),
  database: Schema.optionalKey(DatabaseSchema)
})

const IdentitySchema = Schema.Struct({
  name: Schema.String.check(Schema.isNonEmpty({ message: "a name is required" })),
  email: Schema.String.check(Schema.isNonEmpty({ message: "an email is required" }))
})

/** The plan file as written, with durations in milliseconds and claim keys normalized. */
export const PlanSchema = Schema.Struct({
  version: Schema.optionalKey(Schema.Literal(1)),
  concurrency: Schema.optionalKey(PositiveInt),
  mode: Schema.optionalKey(Schema.Literals(["settle", "fail-fast"])),
  isolation: Schema.optionalKey(Schema.Literals(["worktree", "directory", "none"])),
  merge: Schema.optionalKey(Schema.Literals(["auto", "none"])),
  history: Schema.optionalKey(Schema.Literals(["merge", "squash", "linear"])),
  author: Schema.optionalKey(IdentitySchema),
  committer: Schema.optionalKey(IdentitySchema),
  pools: Schema.optionalKey(Schema.Record(Schema.String, PositiveInt)),
  rateLimits: Schema.optionalKey(Schema.Record(Schema.String, RateLimitSchema)),
  budget: Schema.optionalKey(BudgetSchema),
  defaults: Schema.optionalKey(DefaultsSchema),
  agents: Schema.Array(AgentSchema).check(Schema.isMinLength(1, { message: "a plan needs at least one agent" }))
})

/** A decoded plan file before defaults and semantic checks. */
export type RawPlan = typeof PlanSchema.Type

/** One agent as written in a plan file. */
export type RawAgent = RawPlan["agents"][number]
