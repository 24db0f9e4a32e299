/**
 * Where each attempt of an agent left its output: the last attempt writes `<id>.log` in the run's
 * `logs` folder, and a retry first renames the log of the attempt before it to `<id>@attempt-<n>.log`
 * (an agent id holds no `@`, so the name is never another agent's log).
 *
 * @since 0.1.0
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

/**
 * The file name of an attempt's log: `<id>.log` for the agent's last attempt, `<id>@attempt-<n>.log`
 * for an attempt a retry followed.
 *
 * @since 0.1.0
 * @category logs
 */
export const fileName = (agentId: string, attempt: number, last: boolean): string =>
  last ? `${agentId}.log` : `${agentId}@attempt-${attempt}.log`

/**
 * Renames the log of attempt `attempt` to its own name before the next attempt writes `<id>.log`
 * afresh; an attempt that wrote no log (it failed before its process started) leaves nothing.
 *
 * @since 0.1.0
 * @category logs
 */
export const keep = (logDir: string, agentId: string, attempt: number): void => {
  try {
    NodeFs.renameSync(
      NodePath.join(logDir, fileName(agentId, attempt, true)),
      NodePath.join(logDir, fileName(agentId, attempt, false))
    )
  } catch {
    // no log to keep
  }
}

/**
 * The log of the latest attempt before `attempts` that kept one, with its attempt number: what an
 * agent whose last attempt started no process left.
 *
 * @since 0.1.0
 * @category logs
 */
export const latestKept = (
  logDir: string,
  agentId: string,
  attempts: number
): { readonly attempt: number; readonly log: string } | undefined => {
  for (let attempt = attempts - 1; attempt >= 1; attempt--) {
    const log = NodePath.join(logDir, fileName(agentId, attempt, false))
    if (NodeFs.existsSync(log)) return { attempt, log }
  }
  return undefined
}

/**
 * Each recorded attempt's folder and log path, and whether each is still there (a workspace is
 * removed once its work is merged or it had none; an attempt that failed before its process started
 * wrote no log); `attempts` is how many attempts the agent started (the log of the last one is
 * `<id>.log`).
 *
 * @since 0.1.0
 * @category logs
 */
export const ofAgent = (
  logDir: string,
  agentId: string,
  attempts: number,
  workspaces: ReadonlyArray<{ readonly attempt: number; readonly dir: string }>
): ReadonlyArray<{
  readonly attempt: number
  readonly dir: string
  readonly dirExists: boolean
  readonly log: string
  readonly logExists: boolean
}> =>
  workspaces.map(({ attempt, dir }) => {
    const log = NodePath.join(logDir, fileName(agentId, attempt, attempt >= attempts))
    return { attempt, dir, dirExists: NodeFs.existsSync(dir), log, logExists: NodeFs.existsSync(log) }
  })
