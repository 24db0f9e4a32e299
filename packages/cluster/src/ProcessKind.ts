/**
 * The built-in kind every runner registers: run a command (`ProcessRunner.run`) in the runner's
 * repository, with `CORRAL_RUN_ID`, `CORRAL_AGENT_ID` and `CORRAL_FENCING_TOKEN` (the execution
 * lease's token) in its environment. With `workspace`, the command runs instead in a worktree of the
 * runner's repository started at `workspace.base`, fetched from `workspace.remote`, with the
 * workspace's environment (`CORRAL_WORKSPACE`, ports, private folders); what it leaves is committed
 * and pushed to the remote as `corral/<runId>/<agentId>` (`RemoteWorkspace`), and the worktree is
 * removed on every exit path. Its output lines go to the runner's `AgentOutput` sink (the cluster's
 * database) while it runs. Its processes die with the runner: each process group gets a detached watchdog that
 * kills the group once the runner's pid is gone (SIGKILL included), so a re-run elsewhere never
 * runs beside a leftover.
 *
 * @since 0.1.0
 */
import { spawn } from "node:child_process"
import { isAbsolute, resolve } from "node:path"
import * as Agent from "@corral/core/Agent"
import * as AgentKind from "@corral/core/AgentKind"
import { ProcessRunner } from "@corral/platform-node"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as AgentOutput from "./AgentOutput.ts"
import { inRemoteWorkspace } from "./internal/runnerWorkspace.ts"

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
 * @since 0.1.0
 * @category schemas
 */
export const Identity = Schema.Struct({ name: Schema.String, email: Schema.String })

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
  base: Schema.optional(Schema.String)
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
  message: Schema.String
}) {}

/** Kills process group `group` once `parent` has died; ends by itself when the group is gone. */
const watchdog = (parent: number, group: number) =>
  spawn(
    "sh",
    [
      "-c",
      `while kill -0 ${parent} 2>/dev/null; do kill -0 -${group} 2>/dev/null || exit 0; sleep 0.5; done; kill -KILL -${group} 2>/dev/null`
    ],
    { detached: true, stdio: "ignore" }
  ).unref()

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
      const me = yield* Agent.current
      const identity: Record<string, string> = {
        CORRAL_RUN_ID: me?.runId ?? "",
        CORRAL_AGENT_ID: me?.agentId ?? "",
        ...(me?.fencingToken === undefined ? {} : { CORRAL_FENCING_TOKEN: String(me.fencingToken) })
      }
      const captured = yield* AgentOutput.capture({
        runId: me?.runId ?? "",
        agentId: me?.agentId ?? "",
        attempt: me?.attempt ?? 1,
        fencingToken: me?.fencingToken
      })
      const run = (dir: string, env: Readonly<Record<string, string>>) =>
        ProcessRunner.run({
          command: input.command,
          ...(input.args === undefined ? {} : { args: input.args }),
          ...(input.shell === undefined ? {} : { shell: input.shell }),
          env: { ...env, ...input.env, ...identity },
          cwd: input.cwd === undefined ? dir : isAbsolute(input.cwd) ? input.cwd : resolve(dir, input.cwd),
          ...(captured.onLine === undefined ? {} : { onLine: captured.onLine }),
          onProcess: (pid) => {
            if (pid !== undefined) watchdog(process.pid, pid)
          }
        }).pipe(
          Effect.ensuring(captured.finish),
          Effect.mapError(
            (error) =>
              new CommandFailed({
                reason: error.reason,
                command: error.command,
                exitCode: error.exitCode,
                tail: error.tail,
                message: error.message
              })
          )
        )
      const output = (result: ProcessRunner.ProcessResult, commit: string | undefined) => ({
        exitCode: 0 as const,
        durationMs: result.durationMs,
        tail: result.tail,
        runnerPid: process.pid,
        ...(commit === undefined || input.workspace === undefined
          ? {}
          : { commit, runId: me?.runId ?? "run", base: input.workspace.base })
      })
      if (input.workspace === undefined) return output(yield* run(repo, {}), undefined)
      const done = yield* inRemoteWorkspace(
        repo,
        me?.runId ?? "run",
        me?.agentId ?? "agent",
        input.workspace,
        (handle) => run(handle.dir, handle.env)
      ).pipe(
        Effect.catchIf(
          (error) => !(error instanceof CommandFailed),
          (error) =>
            Effect.fail(
              new CommandFailed({ reason: "workspace", command: input.command, tail: [], message: error.message })
            )
        )
      )
      return output(done.result, done.commit)
    }).pipe(Effect.scoped)
})
