/**
 * The built-in kind every runner registers: run a command (`ProcessRunner.run`) with
 * `CORRAL_RUN_ID`, `CORRAL_AGENT_ID` and `CORRAL_FENCING_TOKEN` (the execution lease's token) in its
 * environment. Without `workspace` it runs in the runner's repository, with the environment of a
 * local `isolation: none` workspace (`CORRAL_WORKSPACE`, ports, private temp, data and cache
 * folders). With `workspace`, it runs instead in a worktree of the runner's repository started at
 * `workspace.base`, fetched from `workspace.remote`, with the workspace's environment; what it
 * leaves is committed and pushed to the remote as `corral/<runId>/<agentId>` (`RemoteWorkspace`),
 * and the worktree is removed on every exit path.
 *
 * A plan's process settings travel in the input and are applied on the runner as a local run
 * applies them: `limits`, `sandbox` (bubblewrap; paths relative to the runner's repository),
 * `passEnv`, `secrets` and `inheritEnv` (values from the runner's own environment: the input holds
 * only names, because persisted messages are stored in the cluster's database) and
 * `database: per-agent` (`CORRAL_AGENT_DB`, and a Postgres schema when the runner has
 * `CORRAL_POSTGRES_URL`). A sandbox the runner cannot provide fails the agent with `CommandFailed`
 * (reason `sandbox`) naming the agent and the runner; no unsandboxed fallback.
 *
 * Its output lines go to the runner's `AgentOutput` sink (the cluster's database) while it runs,
 * secrets redacted. Its processes die with the runner (`ProcessRunner`'s `dieWith`): a detached
 * watchdog, started before the command, kills its process group and every process carrying its
 * token once the runner is gone (SIGKILL included, at any instant; a killed runner not yet reaped,
 * or its pid handed to another process, counts as gone), so a re-run elsewhere never runs beside a
 * leftover. When the watchdog cannot start, the command does not start.
 *
 * @since 0.1.0
 */
import { isAbsolute, resolve } from "node:path"
import * as Agent from "@corral/core/Agent"
import * as AgentKind from "@corral/core/AgentKind"
import { ProcessRunner, Sandbox, type Workspace } from "@corral/platform-node"
import * as AgentDatabase from "@corral/postgres/AgentDatabase"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as AgentOutput from "./AgentOutput.ts"
import * as RunnerIsolation from "./internal/runnerIsolation.ts"
import { CurrentRunnerWorkspaces, inRemoteWorkspace, inSharedWorkspace } from "./internal/runnerWorkspace.ts"

/**
 * The folder relative `cwd`s resolve against: the runner's `--repo`.
 *
 * @since 0.1.0
 * @category references
 */
export const RunnerRepo = Context.Reference<string>("@corral/cluster/ProcessKind/RunnerRepo", {
  defaultValue: () => process.cwd()
})

/**
 * How this runner is named in messages (`Runner.serve` sets its `host:port`).
 *
 * @since 0.1.0
 * @category references
 */
export const RunnerName = Context.Reference<string>("@corral/cluster/ProcessKind/RunnerName", {
  defaultValue: () => `pid ${process.pid}`
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Identity = Schema.Struct({ name: Schema.String, email: Schema.String })

/**
 * @since 0.1.0
 * @category schemas
 */
export const Limits = Schema.Struct({
  memoryMb: Schema.optionalKey(Schema.Number),
  cpuSeconds: Schema.optionalKey(Schema.Number),
  fileSizeMb: Schema.optionalKey(Schema.Number),
  maxProcesses: Schema.optionalKey(Schema.Number),
  nice: Schema.optionalKey(Schema.Number),
  maxOutputBytes: Schema.optionalKey(Schema.Number),
  maxResultBytes: Schema.optionalKey(Schema.Number),
  maxUsageBytes: Schema.optionalKey(Schema.Number),
  cpuPercent: Schema.optionalKey(Schema.Number),
  diskMb: Schema.optionalKey(Schema.Number)
})

/**
 * A sandbox as a plan describes it (`ProcessRunner.SandboxOptions`, relative paths against the runner's repository).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SandboxSettings = Schema.Struct({
  network: Schema.Union([Schema.Boolean, Schema.Literal("loopback")]),
  allow: Schema.Struct({
    read: Schema.Array(Schema.String),
    write: Schema.Array(Schema.String),
    ports: Schema.Array(Schema.Number)
  })
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Input = Schema.Struct({
  command: Schema.String,
  args: Schema.optional(Schema.Array(Schema.String)),
  shell: Schema.optional(Schema.Boolean),
  /** Relative to the runner's repository. */
  cwd: Schema.optional(Schema.String),
  env: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  /** `ProcessRunner.ProcessLimits`, enforced on the runner. */
  limits: Schema.optional(Limits),
  /** Run in a bubblewrap sandbox on the runner; paths relative to the runner's repository. */
  sandbox: Schema.optional(SandboxSettings),
  /** Variables passed from the runner's environment. */
  passEnv: Schema.optional(Schema.Array(Schema.String)),
  /** Variables passed from the runner's environment and redacted in output and stored lines (names only). */
  secrets: Schema.optional(Schema.Array(Schema.String)),
  /** Pass the runner's whole environment instead of a minimal one. */
  inheritEnv: Schema.optional(Schema.Boolean),
  /** `per-agent`: an own SQLite file, and an own Postgres schema where the runner has `CORRAL_POSTGRES_URL`. */
  database: Schema.optional(Schema.Literal("per-agent")),
  /** Run in a worktree at `base` instead of the runner's repository; push the work to `remote`. */
  workspace: Schema.optional(
    Schema.Struct({
      remote: Schema.String,
      base: Schema.String,
      author: Identity,
      committer: Identity,
      sparse: Schema.optional(Schema.Array(Schema.String))
    })
  )
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const Output = Schema.Struct({
  exitCode: Schema.Literal(0),
  durationMs: Schema.Number,
  tail: Schema.Array(Schema.String),
  runnerPid: Schema.Number,
  /** With `workspace`: the agent's commit, pushed to the remote; absent when it changed nothing. */
  commit: Schema.optional(Schema.String),
  /**
   * With `commit`: the run whose branch `corral/<runId>/<agentId>` on the remote holds it (an
   * execution a resumed run took over pushed under the crashed run's id).
   */
  runId: Schema.optional(Schema.String),
  /** With `commit`: the base the agent's worktree started at. */
  base: Schema.optional(Schema.String),
  /** The workspace's warnings (`WorkspaceHandle.warnings`), for the coordinator to show; absent when none. */
  warnings: Schema.optional(Schema.Array(Schema.String))
})

/**
 * The command failed on the runner (exit code, signal, limit or start problem).
 *
 * @since 0.1.0
 * @category errors
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  reason: Schema.String,
  command: Schema.String,
  exitCode: Schema.optional(Schema.Number),
  tail: Schema.Array(Schema.String),
  message: Schema.String,
  /** The warnings of the workspace the command ran in, as in `Output`; absent when none. */
  warnings: Schema.optional(Schema.Array(Schema.String))
}) {}

/** A failure's fields as `CommandFailed` carries them. */
const failedFields = (error: ProcessRunner.ProcessFailed | CommandFailed) => ({
  reason: error.reason,
  command: error.command,
  // an `undefined` field is not JSON: the reply carrying it would not reach the coordinator
  ...(error.exitCode === undefined ? {} : { exitCode: error.exitCode }),
  tail: error.tail,
  message: error.message
})

/** `error` carrying the workspace's `warnings` (none: `error` itself). */
const withWarnings = (error: CommandFailed, warnings: ReadonlyArray<string>): CommandFailed =>
  warnings.length === 0 ? error : new CommandFailed({ ...failedFields(error), warnings })

const commandFailed = (error: ProcessRunner.ProcessFailed | CommandFailed) =>
  error instanceof CommandFailed ? error : new CommandFailed(failedFields(error))

/** The agent's Postgres schema (`database: per-agent` with `CORRAL_POSTGRES_URL` on the runner), one per attempt. */
const postgresOf = (input: Input, runId: string, agentId: string, attempt: number) => {
  const url = process.env[AgentDatabase.urlVariable]
  if (input.database !== "per-agent" || url === undefined || url === "") return undefined
  return { url, schema: AgentDatabase.schemaName(runId, attempt > 1 ? `${agentId}_${attempt}` : agentId) }
}

/**
 * The agent's schema for the scope: a re-delivered execution of the same attempt replaces the one a
 * dead runner left, and the schema is dropped when the agent ends.
 */
const agentSchema = (postgres: { readonly url: string; readonly schema: string }, command: string) =>
  Effect.acquireRelease(
    Effect.andThen(
      AgentDatabase.drop(postgres.url, postgres.schema),
      AgentDatabase.create(postgres.url, postgres.schema)
    ),
    () => Effect.ignore(AgentDatabase.drop(postgres.url, postgres.schema))
  ).pipe(
    Effect.mapError(
      (error) =>
        new CommandFailed({
          reason: "database",
          command,
          tail: [],
          message: `cannot create the agent's Postgres schema ${postgres.schema}: ${error.message}`
        })
    )
  )

/** A workspace failure's message; git missing on the runner names the runner, as a missing sandbox does. */
const workspaceMessage = (error: unknown, runner: string): string => {
  const { _tag, message } = error as { readonly _tag?: string; readonly message: string }
  return _tag === "GitNotFound" ? `runner ${runner} cannot run git: ${message}` : message
}

/** Fails naming the agent and the runner when the input asks for a sandbox this runner cannot provide. */
const sandboxAvailable = (
  input: Input,
  repo: string,
  names: { readonly agentId: string; readonly runner: string }
): Effect.Effect<void, CommandFailed> =>
  input.sandbox === undefined
    ? Effect.void
    : Sandbox.check(RunnerIsolation.sandboxOptions(input.sandbox, repo)).pipe(
        Effect.mapError(
          (error) =>
            new CommandFailed({
              reason: "sandbox",
              command: input.command,
              tail: [],
              message: `agent ${names.agentId} asks for a sandbox, but runner ${names.runner} cannot provide one: ${error.detail}`
            })
        )
      )

/**
 * The input's type.
 *
 * @since 0.1.0
 * @category models
 */
export type Input = typeof Input.Type

/**
 * @since 0.1.0
 * @category kinds
 */
export const ProcessKind = AgentKind.make("corral/process", {
  input: Input,
  output: Output,
  error: CommandFailed,
  handler: (input) =>
    Effect.gen(function* () {
      const repo = yield* RunnerRepo
      const { stateDir } = yield* CurrentRunnerWorkspaces
      const runner = yield* RunnerName
      const me = yield* Agent.current
      const runId = me?.runId ?? "run"
      const agentId = me?.agentId ?? "agent"
      const attempt = me?.attempt ?? 1
      yield* sandboxAvailable(input, repo, { agentId, runner })
      const identity: Record<string, string> = {
        CORRAL_RUN_ID: me?.runId ?? "",
        CORRAL_AGENT_ID: me?.agentId ?? "",
        ...(me?.fencingToken === undefined ? {} : { CORRAL_FENCING_TOKEN: String(me.fencingToken) })
      }
      const postgres = postgresOf(input, runId, agentId, attempt)
      if (postgres !== undefined) yield* agentSchema(postgres, input.command)
      const captured = yield* AgentOutput.capture({
        runId: me?.runId ?? "",
        agentId: me?.agentId ?? "",
        attempt,
        fencingToken: me?.fencingToken
      })
      let warnings: ReadonlyArray<string> = []
      const run = (handle: Workspace.WorkspaceHandle) =>
        Effect.gen(function* () {
          warnings = handle.warnings
          const isolated = RunnerIsolation.of(input, handle, repo, stateDir)
          const gitLink = isolated.sandbox === undefined ? undefined : Sandbox.guardGitLink(handle.dir)
          const result = yield* ProcessRunner.run({
            name: agentId,
            command: input.command,
            ...(input.args === undefined ? {} : { args: input.args }),
            ...(input.shell === undefined ? {} : { shell: input.shell }),
            env: {
              ...RunnerIsolation.passed(input.passEnv),
              ...handle.env,
              ...isolated.env,
              ...(postgres === undefined ? {} : AgentDatabase.agentEnv(postgres.url, postgres.schema)),
              ...input.env,
              ...identity
            },
            ...(input.secrets === undefined ? {} : { secrets: input.secrets }),
            ...(input.inheritEnv === undefined ? {} : { inheritEnv: input.inheritEnv }),
            ...(input.limits === undefined ? {} : { limits: input.limits }),
            ...(isolated.sandbox === undefined ? {} : { sandbox: isolated.sandbox }),
            privateDirs: isolated.privateDirs,
            cwd:
              input.cwd === undefined ? handle.dir : isAbsolute(input.cwd) ? input.cwd : resolve(handle.dir, input.cwd),
            ...(captured.onLine === undefined ? {} : { onLine: captured.onLine }),
            dieWith: process.pid
          }).pipe(Effect.ensuring(Effect.andThen(gitLink?.restore ?? Effect.void, captured.finish)))
          if (gitLink?.tampered()) {
            return yield* new CommandFailed({
              reason: "sandbox",
              command: input.command,
              tail: result.tail,
              message: `the sandboxed agent ${agentId} changed ${gitLink.file} on runner ${runner}; it was restored and the agent's work is not committed`
            })
          }
          return result
        }).pipe(Effect.mapError(commandFailed))
      const output = (result: ProcessRunner.ProcessResult, commit: string | undefined) => ({
        exitCode: 0 as const,
        durationMs: result.durationMs,
        tail: result.tail,
        runnerPid: process.pid,
        ...(commit === undefined || input.workspace === undefined
          ? {}
          : { commit, runId: me?.runId ?? "run", base: input.workspace.base }),
        ...(warnings.length === 0 ? {} : { warnings })
      })
      const workspaceFailed = (error: unknown) =>
        Effect.fail(
          withWarnings(
            error instanceof CommandFailed
              ? error
              : new CommandFailed({
                  reason: "workspace",
                  command: input.command,
                  tail: [],
                  message: workspaceMessage(error, runner)
                }),
            warnings
          )
        )
      if (input.workspace === undefined) {
        const result = yield* inSharedWorkspace(repo, runId, agentId, run).pipe(Effect.catch(workspaceFailed))
        return output(result, undefined)
      }
      const done = yield* inRemoteWorkspace(repo, runId, agentId, input.workspace, run).pipe(
        Effect.catch(workspaceFailed)
      )
      return output(done.result, done.commit)
    }).pipe(Effect.scoped)
})
