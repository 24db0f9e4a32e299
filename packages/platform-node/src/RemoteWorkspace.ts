/**
 * Workspaces across machines, through a git remote that the coordinator and every runner reach (a
 * bare repository path on one machine, any git URL in general):
 *
 * 1. the coordinator {@link publish}es the run's integration head as `corral/<runId>/integration` on
 *    the remote before it starts an agent;
 * 2. the runner {@link fetchBase}s it into its own repository, runs the agent in a disposable
 *    worktree (`Workspace.acquire({ disposable: true })`), {@link commit}s the agent's work (with the
 *    trailers a local run writes) and {@link push}es the agent's branch as `corral/<runId>/<agentId>`;
 * 3. the coordinator {@link fetchWork}es that branch into the user's repository under the same name
 *    (recorded for `corral gc` like a local agent branch) and lands it with `Integration.merge`,
 *    exactly as a local workspace's work; {@link dropBranch} deletes it once merged.
 *
 * {@link clean} removes the run's branches from the remote when the run ends.
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { GitError, git, gitOutput, gitTest, lines } from "./internal/git.ts"
import { appendRecord } from "./internal/runRegistry.ts"
import { makeDir } from "./internal/workspaceFs.ts"
import { commitWork } from "./internal/workspaceIntegration.ts"
import { agentBranch, integrationBranch, locateRepo, takeMergedTip } from "./internal/workspaceRepo.ts"
import type { CommitResult, FetchedWork, Identity, WorkspaceError, WorkspaceHandle } from "./Workspace.ts"

/**
 * A git command against the remote failed (unreachable, rejected, or the expected commit is not
 * there). `message` names the remote, what corral was doing and git's own words.
 *
 * @since 0.1.0
 * @category errors
 */
export class RemoteError extends Schema.TaggedError<RemoteError>()("RemoteError", {
  remote: Schema.String,
  operation: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `cannot ${this.operation} ${this.remote}: ${this.detail.trim()}`
  }
}

const failing =
  (remote: string, operation: string) =>
  <A, R>(effect: Effect.Effect<A, WorkspaceError | RemoteError, R>): Effect.Effect<A, RemoteError, R> =>
    Effect.mapError(effect, (error) =>
      error instanceof RemoteError
        ? error
        : new RemoteError({
            remote,
            operation,
            detail: error instanceof GitError ? error.detail : "stderr" in error ? String(error.stderr) : error.message
          })
    )

/**
 * The remote a coordinator uses when none is given: the bare repository
 * `<git-common-dir>/corral/remote.git` of `repo`, created on first use. It serves runners on the
 * same machine; runners on other machines need a remote they reach (`--remote`).
 *
 * @since 0.1.0
 * @category remotes
 */
export const defaultRemote = (repo: string): Effect.Effect<string, WorkspaceError> =>
  Effect.gen(function* () {
    const { commonDir } = yield* locateRepo(repo)
    const remote = NodePath.join(commonDir, "corral", "remote.git")
    if (!NodeFs.existsSync(NodePath.join(remote, "HEAD"))) {
      yield* makeDir(NodePath.dirname(remote))
      yield* git(["init", "--quiet", "--bare", remote], { cwd: NodePath.dirname(remote) })
    }
    return remote
  })

/**
 * Sets the run's base on the remote (`corral/<runId>/integration`) to `commit`.
 *
 * @since 0.1.0
 * @category coordinator
 */
export const publish = (repo: string, remote: string, runId: string, commit: string) =>
  git(["push", "--quiet", "--force", "--", remote, `${commit}:refs/heads/${integrationBranch(runId)}`], {
    cwd: repo
  }).pipe(Effect.asVoid, failing(remote, `publish the base of run ${runId} to`))

/**
 * Fetches the run's base from the remote into `repo` and checks that `base` arrived.
 *
 * @since 0.1.0
 * @category runner
 */
export const fetchBase = (repo: string, remote: string, runId: string, base: string) =>
  Effect.gen(function* () {
    const ref = `refs/heads/${integrationBranch(runId)}`
    yield* git(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote, ref], { cwd: repo })
    if (!(yield* gitTest(["cat-file", "-e", `${base}^{commit}`], { cwd: repo }))) {
      return yield* Effect.fail(
        new RemoteError({
          remote,
          operation: `fetch the base of run ${runId} from`,
          detail: `${ref} does not contain ${base}`
        })
      )
    }
  }).pipe(failing(remote, `fetch the base of run ${runId} from`))

/**
 * Commits everything in the worktree as `Integration.commitAll` does (same trailers, `author` and
 * `committer`), for a workspace that has no integration branch in its repository.
 *
 * @since 0.1.0
 * @category runner
 */
export const commit = (
  handle: WorkspaceHandle,
  options: { readonly runId: string; readonly message: string; readonly author: Identity; readonly committer: Identity }
): Effect.Effect<CommitResult, WorkspaceError> =>
  Effect.map(commitWork(handle, options), ({ commit, changed }) => ({ commit, changed }))

/**
 * Pushes the workspace's branch to the remote as `corral/<runId>/<agentId>` (replacing what an
 * earlier execution of the agent pushed).
 *
 * @since 0.1.0
 * @category runner
 */
export const push = (handle: WorkspaceHandle, remote: string, runId: string) =>
  git(
    [
      "push",
      "--quiet",
      "--force",
      "--",
      remote,
      `refs/heads/${handle.branch}:refs/heads/${agentBranch(runId, handle.agentId)}`
    ],
    { cwd: handle.dir }
  ).pipe(Effect.asVoid, failing(remote, `push the branch of agent ${handle.agentId} to`))

/**
 * Fetches the agent's pushed branch into `repo` as `corral/<runId>/<agentId>` (recorded in the run's
 * records first, so `corral gc` and `corral discard` treat it as a local agent branch) and checks
 * that it is at `commit`, the tip its runner reported.
 *
 * @since 0.1.0
 * @category coordinator
 */
export const fetchWork = (
  repo: string,
  remote: string,
  work: { readonly runId: string; readonly agentId: string; readonly commit: string; readonly base: string }
): Effect.Effect<FetchedWork, RemoteError> =>
  Effect.gen(function* () {
    const branch = agentBranch(work.runId, work.agentId)
    const { commonDir } = yield* locateRepo(repo)
    yield* appendRecord(NodePath.join(commonDir, "corral"), work.runId, { branch })
    yield* git(
      [
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        remote,
        `+refs/heads/${branch}:refs/heads/${branch}`
      ],
      {
        cwd: repo
      }
    )
    const tip = yield* git(["rev-parse", "--verify", `refs/heads/${branch}^{commit}`], { cwd: repo })
    if (tip !== work.commit) {
      return yield* Effect.fail(
        new RemoteError({
          remote,
          operation: `fetch the work of agent ${work.agentId} from`,
          detail: `${branch} is at ${tip}, its runner pushed ${work.commit}`
        })
      )
    }
    return { agentId: work.agentId, branch, commit: work.commit, base: work.base }
  }).pipe(failing(remote, `fetch the work of agent ${work.agentId} from`))

/**
 * Deletes a fetched agent branch from `repo` once its work is merged (only while it is still at the
 * merged commit). Failures are ignored: `corral gc` removes a merged branch later.
 *
 * @since 0.1.0
 * @category coordinator
 */
export const dropBranch = (repo: string, work: FetchedWork) =>
  Effect.gen(function* () {
    const { commonDir } = yield* locateRepo(repo)
    takeMergedTip(commonDir, work.branch)
    yield* git(["update-ref", "-d", "--", `refs/heads/${work.branch}`, work.commit], { cwd: repo })
  }).pipe(Effect.ignore)

/**
 * Removes every `corral/<runId>/…` branch of the run from the remote. Failures are ignored (the
 * remote is corral's scratch space; kept agent branches live in the user's repository).
 *
 * @since 0.1.0
 * @category coordinator
 */
export const clean = (repo: string, remote: string, runId: string) =>
  Effect.gen(function* () {
    const listed = yield* gitOutput(["ls-remote", "--heads", "--", remote, `refs/heads/corral/${runId}/*`], {
      cwd: repo
    })
    const refs = lines(listed.stdout).flatMap((line) => {
      const ref = line.split("\t")[1]
      return ref === undefined ? [] : [`:${ref}`]
    })
    if (refs.length > 0) yield* git(["push", "--quiet", "--", remote, ...refs], { cwd: repo })
  }).pipe(Effect.ignore)
